/*
 * base64 (RFC 4648, standard alphabet, with padding): how binary data, a packet
 * capture's records, rides in the control protocol's JSON records. Pure functions, any
 * thread.
 */
#ifndef IBGW_LIB_BASE64_H
#define IBGW_LIB_BASE64_H

#include <stddef.h>
#include <stdint.h>

/* Characters base64_encode writes for n octets (without the terminating NUL). */
static inline size_t base64_encoded_len(size_t n)
{
	return (n + 2) / 3 * 4;
}

/* Encode in[0..n) into out (base64_encoded_len(n) + 1 octets: NUL-terminated).
 * Returns the characters written. */
size_t base64_encode(const uint8_t *in, size_t n, char *out);

/* Decode text[0..len) into out (room for cap octets). Returns the octets written, or
 * -EINVAL (a length not a multiple of 4, a character outside the alphabet, padding
 * anywhere but at the end, non-zero bits under the padding) or -ENOSPC. */
long base64_decode(const char *text, size_t len, uint8_t *out, size_t cap);

#endif
