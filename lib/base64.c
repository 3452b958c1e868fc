/*
 * base64 (see base64.h). Strict decoding: one encoding per octet string, so a decoder
 * that accepts it gives back exactly what was encoded.
 */
#include "lib/base64.h"

#include <errno.h>
#include <stdbool.h>

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t base64_encode(const uint8_t *in, size_t n, char *out)
{
	size_t o = 0, i = 0;

	for (; i + 3 <= n; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];

		out[o++] = alphabet[v >> 18];
		out[o++] = alphabet[(v >> 12) & 63];
		out[o++] = alphabet[(v >> 6) & 63];
		out[o++] = alphabet[v & 63];
	}
	if (i < n) {
		uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0);

		out[o++] = alphabet[v >> 18];
		out[o++] = alphabet[(v >> 12) & 63];
		out[o++] = i + 1 < n ? alphabet[(v >> 6) & 63] : '=';
		out[o++] = '=';
	}
	out[o] = '\0';
	return o;
}

/* The value of a base64 character, or -1. */
static int value(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

long base64_decode(const char *text, size_t len, uint8_t *out, size_t cap)
{
	size_t o = 0;

	if (len % 4)
		return -EINVAL;
	for (size_t i = 0; i < len; i += 4) {
		bool last = i + 4 == len;
		int pad =
		    last ? (text[i + 3] == '=') + (text[i + 2] == '=' && text[i + 3] == '=') : 0;
		int v[4];
		uint32_t w = 0;

		for (int k = 0; k < 4; k++) {
			v[k] = k >= 4 - pad ? 0 : value(text[i + k]);
			if (v[k] < 0)
				return -EINVAL;
			w = w << 6 | (uint32_t)v[k];
		}
		if ((pad == 1 && (v[2] & 3)) || (pad == 2 && (v[1] & 15)))
			return -EINVAL; /* bits under the padding must be zero */
		if (o + 3 - (size_t)pad > cap)
			return -ENOSPC;
		out[o++] = (uint8_t)(w >> 16);
		if (pad < 2)
			out[o++] = (uint8_t)(w >> 8);
		if (pad < 1)
			out[o++] = (uint8_t)w;
	}
	return (long)o;
}
