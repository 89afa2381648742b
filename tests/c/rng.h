/*
 * The C tests' random numbers: xorshift64*, so that a seed gives the same calls on every run,
 * with the library or without it. Set rng_state (never to 0) before the first rnd().
 */
#ifndef UFUTEX_TESTS_RNG_H
#define UFUTEX_TESTS_RNG_H

#include <stdint.h>

static uint64_t rng_state = 1;

static inline uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1DULL;
}

/* A number below `n` (0 for 0). */
static inline uint64_t below(uint64_t n)
{
	return n ? rnd() % n : 0;
}

#endif
