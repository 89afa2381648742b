// C++20 synchronisation that libstdc++ builds on the futex through syscall():
// std::atomic::wait/notify, std::latch, std::counting_semaphore, and std::future with a
// system_clock deadline (FUTEX_WAIT_BITSET | FUTEX_CLOCK_REALTIME). Checks its own result;
// CI runs it under LD_PRELOAD=libufutex_preload.so.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <latch>
#include <semaphore>
#include <thread>
#include <vector>

int main()
{
	constexpr int threads = 4, rounds = 2000;
	std::atomic<int> turn{0};
	std::latch done(threads);
	std::counting_semaphore<threads> slots(2);
	std::atomic<int> inside{0}, most{0};
	std::vector<std::thread> ts;
	for (int id = 0; id < threads; id++)
		ts.emplace_back([&, id] {
			for (int r = 0; r < rounds; r++) {
				int want = r * threads + id; // take turns: thread id on every threads-th value
				for (int v = turn.load(); v != want; v = turn.load())
					turn.wait(v);
				turn.store(want + 1);
				turn.notify_all();
			}
			slots.acquire();
			int now = ++inside;
			for (int m = most.load(); now > m && !most.compare_exchange_weak(m, now);)
				;
			--inside;
			slots.release();
			done.count_down();
		});
	done.wait();
	for (auto &t : ts)
		t.join();
	if (turn.load() != threads * rounds || most.load() > 2) {
		std::printf("cxx_sync: FAILED turn=%d most=%d\n", turn.load(), most.load());
		return 1;
	}
	std::promise<int> p;
	std::future<int> f = p.get_future();
	auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(20);
	if (f.wait_until(deadline) != std::future_status::timeout) {
		std::puts("cxx_sync: FAILED: the future was ready before its value");
		return 1;
	}
	std::thread setter([&] { p.set_value(42); });
	if (f.wait_until(std::chrono::system_clock::now() + std::chrono::seconds(60)) != std::future_status::ready || f.get() != 42) {
		std::puts("cxx_sync: FAILED: the future's value");
		return 1;
	}
	setter.join();
	std::puts("cxx_sync: ok");
	return 0;
}
