/*
 * libufutex.so loaded with dlopen, a thread's first wait made through it, the library closed
 * with dlclose while that thread lives, then the thread exits. The thread's wait state is
 * dropped at its exit by a destructor in the library (a pthread key's), so the library must
 * still be there: it keeps itself loaded (RTLD_NODELETE) when it makes the key, and dlclose
 * leaves it. Exit status 0 and "ok" when the thread exited cleanly after its wait timed out.
 *
 * Usage: dlclose /path/to/libufutex.so
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <ufutex.h>

typedef long (*wait_fn)(void *, unsigned long, unsigned long, unsigned int, const struct timespec *, clockid_t);

static wait_fn wait_call;
static sem_t waited, closed;

static void *waiter(void *arg)
{
	(void)arg;
	uint32_t word = 0;
	struct timespec at;
	clock_gettime(CLOCK_MONOTONIC, &at);
	at.tv_nsec += 1000000;
	if (at.tv_nsec >= 1000000000) {
		at.tv_sec++;
		at.tv_nsec -= 1000000000;
	}
	long r = wait_call(&word, 0, ~0UL >> 32, UFUTEX_SIZE_U32 | UFUTEX_PRIVATE, &at, CLOCK_MONOTONIC);
	int timed_out = r == -1 && errno == ETIMEDOUT;
	sem_post(&waited);
	sem_wait(&closed);
	return (void *)(intptr_t)timed_out;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s /path/to/libufutex.so\n", argv[0]);
		return 2;
	}
	void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 1;
	}
	wait_call = (wait_fn)(uintptr_t)dlsym(lib, "ufutex_wait");
	if (!wait_call) {
		fprintf(stderr, "dlsym: %s\n", dlerror());
		return 1;
	}
	sem_init(&waited, 0, 0);
	sem_init(&closed, 0, 0);
	pthread_t t;
	if (pthread_create(&t, NULL, waiter, NULL) != 0)
		return 1;
	sem_wait(&waited);
	if (dlclose(lib) != 0) {
		fprintf(stderr, "dlclose: %s\n", dlerror());
		return 1;
	}
	sem_post(&closed);
	void *timed_out;
	pthread_join(t, &timed_out);
	if (!timed_out) {
		fprintf(stderr, "the wait did not time out\n");
		return 1;
	}
	puts("ok");
	return 0;
}
