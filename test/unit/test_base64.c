/*
 * base64: RFC 4648's test vectors both ways, round trips of every length up to 300
 * against a second, bit-by-bit encoder, and the strict decoder's refusals.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lib/base64.h"

static void test_rfc4648_vectors(void **state)
{
	static const char *const plain[] = { "", "f", "fo", "foo", "foob", "fooba", "foobar" };
	static const char *const coded[] = { "",         "Zg==",     "Zm8=",    "Zm9v",
					     "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy" };
	char buf[16];
	uint8_t back[16];

	(void)state;
	for (unsigned i = 0; i < 7; i++) {
		size_t n = strlen(plain[i]);

		assert_int_equal(base64_encode((const uint8_t *)plain[i], n, buf),
				 strlen(coded[i]));
		assert_string_equal(buf, coded[i]);
		assert_int_equal(base64_encoded_len(n), strlen(coded[i]));
		assert_int_equal(base64_decode(coded[i], strlen(coded[i]), back, sizeof(back)),
				 (long)n);
		assert_memory_equal(back, plain[i], n);
	}
}

/* A second encoder, six bits at a time from a bit cursor. */
static void slow_encode(const uint8_t *in, size_t n, char *out)
{
	static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t bits = n * 8, o = 0;

	for (size_t b = 0; b < bits; b += 6) {
		unsigned v = 0;

		for (size_t k = b; k < b + 6; k++)
			v = v << 1 | (k < bits ? (in[k / 8] >> (7 - k % 8)) & 1u : 0u);
		out[o++] = a[v];
	}
	while (o % 4)
		out[o++] = '=';
	out[o] = '\0';
}

static void test_round_trips(void **state)
{
	uint8_t in[300], back[300];
	char fast[410], slow[410];

	(void)state;
	srand(7);
	for (size_t n = 0; n <= sizeof(in); n++) {
		for (size_t i = 0; i < n; i++)
			in[i] = (uint8_t)rand();
		base64_encode(in, n, fast);
		slow_encode(in, n, slow);
		assert_string_equal(fast, slow);
		assert_int_equal(base64_decode(fast, strlen(fast), back, n), (long)n);
		assert_memory_equal(back, in, n);
		if (n)
			assert_int_equal(base64_decode(fast, strlen(fast), back, n - 1), -ENOSPC);
	}
}

static void test_refusals(void **state)
{
	uint8_t out[16];

	(void)state;
	assert_int_equal(base64_decode("Zm9", 3, out, sizeof(out)), -EINVAL);      /* length */
	assert_int_equal(base64_decode("Zm9v!A==", 8, out, sizeof(out)), -EINVAL); /* alphabet */
	assert_int_equal(base64_decode("Zg==Zm9v", 8, out, sizeof(out)), -EINVAL); /* pad inside */
	assert_int_equal(base64_decode("Zm=v", 4, out, sizeof(out)), -EINVAL);     /* = then data */
	assert_int_equal(base64_decode("Zh==", 4, out, sizeof(out)), -EINVAL); /* bits under pad */
	assert_int_equal(base64_decode("Zm9=", 4, out, sizeof(out)), -EINVAL); /* bits under pad */
	assert_int_equal(base64_decode("====", 4, out, sizeof(out)), -EINVAL);
	assert_int_equal(base64_decode("Zm8=", 4, out, sizeof(out)), 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rfc4648_vectors),
		cmocka_unit_test(test_round_trips),
		cmocka_unit_test(test_refusals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
