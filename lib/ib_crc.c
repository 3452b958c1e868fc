/*
 * InfiniBand ICRC and VCRC (see ib_crc.h for the definitions and their sources).
 *
 * Table lookups, eight bytes at a time ("slicing-by-8", as zlib and the Linux kernel's
 * crc32 do): table k gives a byte's CRC as if k zero bytes followed it, so eight bytes
 * fold into the register with eight independent lookups instead of a chain of eight.
 * The simulated rack computes both CRCs of every packet at the sender, the fabric and
 * the receiver: byte at a time they took about a third of the gateway worker's CPU on
 * the rack (perf, bench/README.md "routers.sh"). Table 0 is a constant (generated from
 * the reflected polynomials 0xEDB88320 and 0xD008); tables 1..7 are derived from it once,
 * before main (a constructor), so no call pays an init check and nothing is shared
 * that is ever written afterwards. The variant fields are masked in a small stack copy
 * of the headers, never in place.
 *
 * On x86-64 CPUs with PCLMULQDQ (checked once, in the same constructor), runs of 64
 * octets or more are first folded with carry-less multiplies, 64 octets a round, down
 * to 16 octets congruent to them modulo the polynomial ("Fast CRC Computation for
 * Generic Polynomials Using PCLMULQDQ", Intel 2009; zlib's crc32_simd does the same
 * for CRC-32); the slices finish those 16 octets and the tail. The CRC-16 folds with
 * the degree-32 polynomial 0x100B * x^16: what is congruent modulo it is congruent
 * modulo 0x100B, so the same code serves both, with constants x^k mod P computed in the
 * constructor. Ten times the slices' rate on 2 KiB packets: the rack's three CRC
 * passes per packet (sender, fabric, receiver) were 18 % of its CPU at 8 octets a
 * round (bench/README.md).
 */
#include "lib/ib_crc.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define CRC_CLMUL 1
#endif

/* Reflected CRC-32, polynomial 0x04C11DB7 (reversed 0xEDB88320). */
static const uint32_t crc32_table[256] = {
	0x00000000, 0x77073096, 0xee0e612c, 0x990951ba, 0x076dc419, 0x706af48f, 0xe963a535,
	0x9e6495a3, 0x0edb8832, 0x79dcb8a4, 0xe0d5e91e, 0x97d2d988, 0x09b64c2b, 0x7eb17cbd,
	0xe7b82d07, 0x90bf1d91, 0x1db71064, 0x6ab020f2, 0xf3b97148, 0x84be41de, 0x1adad47d,
	0x6ddde4eb, 0xf4d4b551, 0x83d385c7, 0x136c9856, 0x646ba8c0, 0xfd62f97a, 0x8a65c9ec,
	0x14015c4f, 0x63066cd9, 0xfa0f3d63, 0x8d080df5, 0x3b6e20c8, 0x4c69105e, 0xd56041e4,
	0xa2677172, 0x3c03e4d1, 0x4b04d447, 0xd20d85fd, 0xa50ab56b, 0x35b5a8fa, 0x42b2986c,
	0xdbbbc9d6, 0xacbcf940, 0x32d86ce3, 0x45df5c75, 0xdcd60dcf, 0xabd13d59, 0x26d930ac,
	0x51de003a, 0xc8d75180, 0xbfd06116, 0x21b4f4b5, 0x56b3c423, 0xcfba9599, 0xb8bda50f,
	0x2802b89e, 0x5f058808, 0xc60cd9b2, 0xb10be924, 0x2f6f7c87, 0x58684c11, 0xc1611dab,
	0xb6662d3d, 0x76dc4190, 0x01db7106, 0x98d220bc, 0xefd5102a, 0x71b18589, 0x06b6b51f,
	0x9fbfe4a5, 0xe8b8d433, 0x7807c9a2, 0x0f00f934, 0x9609a88e, 0xe10e9818, 0x7f6a0dbb,
	0x086d3d2d, 0x91646c97, 0xe6635c01, 0x6b6b51f4, 0x1c6c6162, 0x856530d8, 0xf262004e,
	0x6c0695ed, 0x1b01a57b, 0x8208f4c1, 0xf50fc457, 0x65b0d9c6, 0x12b7e950, 0x8bbeb8ea,
	0xfcb9887c, 0x62dd1ddf, 0x15da2d49, 0x8cd37cf3, 0xfbd44c65, 0x4db26158, 0x3ab551ce,
	0xa3bc0074, 0xd4bb30e2, 0x4adfa541, 0x3dd895d7, 0xa4d1c46d, 0xd3d6f4fb, 0x4369e96a,
	0x346ed9fc, 0xad678846, 0xda60b8d0, 0x44042d73, 0x33031de5, 0xaa0a4c5f, 0xdd0d7cc9,
	0x5005713c, 0x270241aa, 0xbe0b1010, 0xc90c2086, 0x5768b525, 0x206f85b3, 0xb966d409,
	0xce61e49f, 0x5edef90e, 0x29d9c998, 0xb0d09822, 0xc7d7a8b4, 0x59b33d17, 0x2eb40d81,
	0xb7bd5c3b, 0xc0ba6cad, 0xedb88320, 0x9abfb3b6, 0x03b6e20c, 0x74b1d29a, 0xead54739,
	0x9dd277af, 0x04db2615, 0x73dc1683, 0xe3630b12, 0x94643b84, 0x0d6d6a3e, 0x7a6a5aa8,
	0xe40ecf0b, 0x9309ff9d, 0x0a00ae27, 0x7d079eb1, 0xf00f9344, 0x8708a3d2, 0x1e01f268,
	0x6906c2fe, 0xf762575d, 0x806567cb, 0x196c3671, 0x6e6b06e7, 0xfed41b76, 0x89d32be0,
	0x10da7a5a, 0x67dd4acc, 0xf9b9df6f, 0x8ebeeff9, 0x17b7be43, 0x60b08ed5, 0xd6d6a3e8,
	0xa1d1937e, 0x38d8c2c4, 0x4fdff252, 0xd1bb67f1, 0xa6bc5767, 0x3fb506dd, 0x48b2364b,
	0xd80d2bda, 0xaf0a1b4c, 0x36034af6, 0x41047a60, 0xdf60efc3, 0xa867df55, 0x316e8eef,
	0x4669be79, 0xcb61b38c, 0xbc66831a, 0x256fd2a0, 0x5268e236, 0xcc0c7795, 0xbb0b4703,
	0x220216b9, 0x5505262f, 0xc5ba3bbe, 0xb2bd0b28, 0x2bb45a92, 0x5cb36a04, 0xc2d7ffa7,
	0xb5d0cf31, 0x2cd99e8b, 0x5bdeae1d, 0x9b64c2b0, 0xec63f226, 0x756aa39c, 0x026d930a,
	0x9c0906a9, 0xeb0e363f, 0x72076785, 0x05005713, 0x95bf4a82, 0xe2b87a14, 0x7bb12bae,
	0x0cb61b38, 0x92d28e9b, 0xe5d5be0d, 0x7cdcefb7, 0x0bdbdf21, 0x86d3d2d4, 0xf1d4e242,
	0x68ddb3f8, 0x1fda836e, 0x81be16cd, 0xf6b9265b, 0x6fb077e1, 0x18b74777, 0x88085ae6,
	0xff0f6a70, 0x66063bca, 0x11010b5c, 0x8f659eff, 0xf862ae69, 0x616bffd3, 0x166ccf45,
	0xa00ae278, 0xd70dd2ee, 0x4e048354, 0x3903b3c2, 0xa7672661, 0xd06016f7, 0x4969474d,
	0x3e6e77db, 0xaed16a4a, 0xd9d65adc, 0x40df0b66, 0x37d83bf0, 0xa9bcae53, 0xdebb9ec5,
	0x47b2cf7f, 0x30b5ffe9, 0xbdbdf21c, 0xcabac28a, 0x53b39330, 0x24b4a3a6, 0xbad03605,
	0xcdd70693, 0x54de5729, 0x23d967bf, 0xb3667a2e, 0xc4614ab8, 0x5d681b02, 0x2a6f2b94,
	0xb40bbe37, 0xc30c8ea1, 0x5a05df1b, 0x2d02ef8d,
};

/* Reflected CRC-16, polynomial 0x100B (reversed 0xD008). */
static const uint16_t crc16_table[256] = {
	0x0000, 0x1ba1, 0x3742, 0x2ce3, 0x6e84, 0x7525, 0x59c6, 0x4267, 0xdd08, 0xc6a9, 0xea4a,
	0xf1eb, 0xb38c, 0xa82d, 0x84ce, 0x9f6f, 0x1a01, 0x01a0, 0x2d43, 0x36e2, 0x7485, 0x6f24,
	0x43c7, 0x5866, 0xc709, 0xdca8, 0xf04b, 0xebea, 0xa98d, 0xb22c, 0x9ecf, 0x856e, 0x3402,
	0x2fa3, 0x0340, 0x18e1, 0x5a86, 0x4127, 0x6dc4, 0x7665, 0xe90a, 0xf2ab, 0xde48, 0xc5e9,
	0x878e, 0x9c2f, 0xb0cc, 0xab6d, 0x2e03, 0x35a2, 0x1941, 0x02e0, 0x4087, 0x5b26, 0x77c5,
	0x6c64, 0xf30b, 0xe8aa, 0xc449, 0xdfe8, 0x9d8f, 0x862e, 0xaacd, 0xb16c, 0x6804, 0x73a5,
	0x5f46, 0x44e7, 0x0680, 0x1d21, 0x31c2, 0x2a63, 0xb50c, 0xaead, 0x824e, 0x99ef, 0xdb88,
	0xc029, 0xecca, 0xf76b, 0x7205, 0x69a4, 0x4547, 0x5ee6, 0x1c81, 0x0720, 0x2bc3, 0x3062,
	0xaf0d, 0xb4ac, 0x984f, 0x83ee, 0xc189, 0xda28, 0xf6cb, 0xed6a, 0x5c06, 0x47a7, 0x6b44,
	0x70e5, 0x3282, 0x2923, 0x05c0, 0x1e61, 0x810e, 0x9aaf, 0xb64c, 0xaded, 0xef8a, 0xf42b,
	0xd8c8, 0xc369, 0x4607, 0x5da6, 0x7145, 0x6ae4, 0x2883, 0x3322, 0x1fc1, 0x0460, 0x9b0f,
	0x80ae, 0xac4d, 0xb7ec, 0xf58b, 0xee2a, 0xc2c9, 0xd968, 0xd008, 0xcba9, 0xe74a, 0xfceb,
	0xbe8c, 0xa52d, 0x89ce, 0x926f, 0x0d00, 0x16a1, 0x3a42, 0x21e3, 0x6384, 0x7825, 0x54c6,
	0x4f67, 0xca09, 0xd1a8, 0xfd4b, 0xe6ea, 0xa48d, 0xbf2c, 0x93cf, 0x886e, 0x1701, 0x0ca0,
	0x2043, 0x3be2, 0x7985, 0x6224, 0x4ec7, 0x5566, 0xe40a, 0xffab, 0xd348, 0xc8e9, 0x8a8e,
	0x912f, 0xbdcc, 0xa66d, 0x3902, 0x22a3, 0x0e40, 0x15e1, 0x5786, 0x4c27, 0x60c4, 0x7b65,
	0xfe0b, 0xe5aa, 0xc949, 0xd2e8, 0x908f, 0x8b2e, 0xa7cd, 0xbc6c, 0x2303, 0x38a2, 0x1441,
	0x0fe0, 0x4d87, 0x5626, 0x7ac5, 0x6164, 0xb80c, 0xa3ad, 0x8f4e, 0x94ef, 0xd688, 0xcd29,
	0xe1ca, 0xfa6b, 0x6504, 0x7ea5, 0x5246, 0x49e7, 0x0b80, 0x1021, 0x3cc2, 0x2763, 0xa20d,
	0xb9ac, 0x954f, 0x8eee, 0xcc89, 0xd728, 0xfbcb, 0xe06a, 0x7f05, 0x64a4, 0x4847, 0x53e6,
	0x1181, 0x0a20, 0x26c3, 0x3d62, 0x8c0e, 0x97af, 0xbb4c, 0xa0ed, 0xe28a, 0xf92b, 0xd5c8,
	0xce69, 0x5106, 0x4aa7, 0x6644, 0x7de5, 0x3f82, 0x2423, 0x08c0, 0x1361, 0x960f, 0x8dae,
	0xa14d, 0xbaec, 0xf88b, 0xe32a, 0xcfc9, 0xd468, 0x4b07, 0x50a6, 0x7c45, 0x67e4, 0x2583,
	0x3e22, 0x12c1, 0x0960,
};

/* Tables 0..7 of each CRC; the CRC-16 ones widened to 32 bits so that one loop serves
 * both (a 16-bit register shifted right stays 16 bits). */
static uint32_t crc32_slice[8][256], crc16_slice[8][256];

#ifdef CRC_CLMUL
/* Folding constants, reflected and shifted left by one as the carry-less multiply of
 * reflected operands needs: x^544 and x^480 mod P (fold 64 octets forward: the low and
 * high halves of a 16-octet lane), x^160 and x^96 mod P (fold 16 octets). */
static uint64_t crc32_fold_k[4], crc16_fold_k[4];
static bool have_clmul;

/* x^e mod p (p of degree 32, bit i the coefficient of x^i), bit-reversed over 32 bits
 * and shifted left by one. */
static uint64_t fold_constant(unsigned e, uint64_t p)
{
	uint64_t r = 1, v = 0;

	while (e--) {
		r <<= 1;
		if (r >> 32 & 1)
			r ^= p;
	}
	for (int i = 0; i < 32; i++)
		v |= (r >> i & 1) << (31 - i);
	return v << 1;
}

static void fold_constants(uint64_t k[4], uint64_t p)
{
	static const unsigned e[4] = { 544, 480, 160, 96 };

	for (int i = 0; i < 4; i++)
		k[i] = fold_constant(e[i], p);
}
#endif

__attribute__((constructor)) static void crc_slices_init(void)
{
#ifdef CRC_CLMUL
	__builtin_cpu_init();
	have_clmul = __builtin_cpu_supports("pclmul");
	fold_constants(crc32_fold_k, 0x104c11db7ull);
	fold_constants(crc16_fold_k, 0x100000000ull | 0x100bull << 16);
#endif
	for (unsigned b = 0; b < 256; b++) {
		crc32_slice[0][b] = crc32_table[b];
		crc16_slice[0][b] = crc16_table[b];
	}
	for (unsigned k = 1; k < 8; k++)
		for (unsigned b = 0; b < 256; b++) {
			uint32_t c = crc32_slice[k - 1][b], d = crc16_slice[k - 1][b];

			crc32_slice[k][b] = crc32_slice[0][c & 0xff] ^ (c >> 8);
			crc16_slice[k][b] = crc16_slice[0][d & 0xff] ^ (d >> 8);
		}
}

static inline uint32_t le32_at(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A reflected CRC register of up to 32 bits through buf, eight bytes a round. */
static inline uint32_t crc_sliced(const uint32_t (*t)[256], uint32_t state, const uint8_t *buf,
				  size_t len)
{
	for (; len >= 8; len -= 8, buf += 8) {
		uint32_t lo = le32_at(buf) ^ state, hi = le32_at(buf + 4);

		state = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^
			t[4][lo >> 24] ^ t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^
			t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
	}
	while (len--)
		state = t[0][(state ^ *buf++) & 0xff] ^ (state >> 8);
	return state;
}

#ifdef CRC_CLMUL
/* Fold len octets (a multiple of 16, at least 64) with the register state XORed into
 * the first ones, into 16 octets at out whose CRC from a zero register is the same. */
__attribute__((target("pclmul"))) static void
crc_fold(const uint64_t k[4], uint32_t state, const uint8_t *buf, size_t len, uint8_t out[16])
{
	__m128i k12 = _mm_set_epi64x((long long)k[1], (long long)k[0]);
	__m128i k34 = _mm_set_epi64x((long long)k[3], (long long)k[2]);
	__m128i x1 = _mm_loadu_si128((const __m128i *)buf);
	__m128i x2 = _mm_loadu_si128((const __m128i *)(buf + 16));
	__m128i x3 = _mm_loadu_si128((const __m128i *)(buf + 32));
	__m128i x4 = _mm_loadu_si128((const __m128i *)(buf + 48));

	x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)state));
	for (buf += 64, len -= 64; len >= 64; buf += 64, len -= 64) {
		__m128i y1 = _mm_clmulepi64_si128(x1, k12, 0x00);
		__m128i y2 = _mm_clmulepi64_si128(x2, k12, 0x00);
		__m128i y3 = _mm_clmulepi64_si128(x3, k12, 0x00);
		__m128i y4 = _mm_clmulepi64_si128(x4, k12, 0x00);

		x1 = _mm_xor_si128(_mm_clmulepi64_si128(x1, k12, 0x11), y1);
		x2 = _mm_xor_si128(_mm_clmulepi64_si128(x2, k12, 0x11), y2);
		x3 = _mm_xor_si128(_mm_clmulepi64_si128(x3, k12, 0x11), y3);
		x4 = _mm_xor_si128(_mm_clmulepi64_si128(x4, k12, 0x11), y4);
		x1 = _mm_xor_si128(x1, _mm_loadu_si128((const __m128i *)buf));
		x2 = _mm_xor_si128(x2, _mm_loadu_si128((const __m128i *)(buf + 16)));
		x3 = _mm_xor_si128(x3, _mm_loadu_si128((const __m128i *)(buf + 32)));
		x4 = _mm_xor_si128(x4, _mm_loadu_si128((const __m128i *)(buf + 48)));
	}
	/* Four lanes into one, then the remaining 16-octet blocks. */
	x1 = _mm_xor_si128(
	    _mm_xor_si128(_mm_clmulepi64_si128(x1, k34, 0x00), _mm_clmulepi64_si128(x1, k34, 0x11)),
	    x2);
	x1 = _mm_xor_si128(
	    _mm_xor_si128(_mm_clmulepi64_si128(x1, k34, 0x00), _mm_clmulepi64_si128(x1, k34, 0x11)),
	    x3);
	x1 = _mm_xor_si128(
	    _mm_xor_si128(_mm_clmulepi64_si128(x1, k34, 0x00), _mm_clmulepi64_si128(x1, k34, 0x11)),
	    x4);
	for (; len >= 16; buf += 16, len -= 16)
		x1 = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x1, k34, 0x00),
						 _mm_clmulepi64_si128(x1, k34, 0x11)),
				   _mm_loadu_si128((const __m128i *)buf));
	_mm_storeu_si128((__m128i *)out, x1);
}
#endif

static inline uint32_t crc_update(const uint32_t (*t)[256], const uint64_t *k, uint32_t state,
				  const uint8_t *buf, size_t len)
{
#ifdef CRC_CLMUL
	if (have_clmul && len >= 64) {
		uint8_t r[16];
		size_t n = len & ~(size_t)15;

		crc_fold(k, state, buf, n, r);
		state = crc_sliced(t, 0, r, sizeof(r));
		buf += n;
		len -= n;
	}
#else
	(void)k;
#endif
	return crc_sliced(t, state, buf, len);
}

#ifdef CRC_CLMUL
#define FOLD_K(name) name
#else
#define FOLD_K(name) NULL
#endif

uint32_t ib_crc32_update(uint32_t state, const uint8_t *buf, size_t len)
{
	return crc_update(crc32_slice, FOLD_K(crc32_fold_k), state, buf, len);
}

uint32_t ib_crc32(const uint8_t *buf, size_t len)
{
	return ~ib_crc32_update(0xffffffffu, buf, len);
}

uint16_t ib_crc16_update(uint16_t state, const uint8_t *buf, size_t len)
{
	return (uint16_t)crc_update(crc16_slice, FOLD_K(crc16_fold_k), state, buf, len);
}

/* Header sizes repeated here so the CRC code needs no other header of ours. */
enum {
	LRH_LEN = 8,
	GRH_LEN = 40,
	BTH_LEN = 12,
	LNH_IBA_LOCAL = 2,
	LNH_IBA_GLOBAL = 3,
};

int ib_icrc_compute(const uint8_t *buf, size_t len, uint32_t *out)
{
	uint8_t hdr[LRH_LEN + GRH_LEN + BTH_LEN];
	size_t hlen, bth;
	uint8_t lnh;

	if (len < LRH_LEN)
		return -EMSGSIZE;
	lnh = buf[1] & 0x3;
	if (lnh == LNH_IBA_LOCAL)
		bth = LRH_LEN;
	else if (lnh == LNH_IBA_GLOBAL)
		bth = LRH_LEN + GRH_LEN;
	else
		return -EINVAL;
	hlen = bth + BTH_LEN;
	if (len < hlen)
		return -EMSGSIZE;

	memcpy(hdr, buf, hlen);
	if (lnh == LNH_IBA_LOCAL) {
		hdr[0] |= 0xf0; /* VL */
	} else {
		memset(hdr, 0xff, LRH_LEN); /* routers rewrite the whole LRH */
		hdr[LRH_LEN + 0] |= 0x0f;   /* traffic class, high nibble */
		hdr[LRH_LEN + 1] = 0xff;    /* traffic class low nibble, flow label 19:16 */
		hdr[LRH_LEN + 2] = 0xff;    /* flow label 15:0 */
		hdr[LRH_LEN + 3] = 0xff;
		hdr[LRH_LEN + 7] = 0xff; /* hop limit */
	}
	hdr[bth + 4] = 0xff; /* BTH resv8a: FECN, BECN, reserved */

	*out = ~ib_crc32_update(ib_crc32_update(0xffffffffu, hdr, hlen), buf + hlen, len - hlen);
	return 0;
}

uint16_t ib_vcrc_compute(const uint8_t *buf, size_t len)
{
	return (uint16_t)~ib_crc16_update(0xffff, buf, len);
}
