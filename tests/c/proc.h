/*
 * What /proc says of a thread, for tests that must know that a waiter is asleep (and so past
 * its comparison of the value) before they go on.
 */
#ifndef UFUTEX_TESTS_PROC_H
#define UFUTEX_TESTS_PROC_H

#include <stdio.h>
#include <string.h>
#include <sys/types.h>

/* Whether thread `tid` of process `pid` is asleep: state S in /proc/PID/task/TID/stat. */
static inline int thread_sleeps(pid_t pid, pid_t tid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	const char *state = strrchr(buf, ')'); /* "pid (comm) S ..." */
	return state && state[1] == ' ' && state[2] == 'S';
}

#endif
