/*
 * Small IB enumerations shared by ports, the SA client and IPoIB: the MTU and rate
 * codes of PortInfo, PathRecords and MCMemberRecords (IBA vol 1, 15.2.5.16).
 */
#ifndef IBGW_LIB_IB_TYPES_H
#define IBGW_LIB_IB_TYPES_H

/* IB MTU codes: 1 = 256 ... 5 = 4096 octets of payload per packet. */
enum ib_mtu {
	IB_MTU_256 = 1,
	IB_MTU_512,
	IB_MTU_1024,
	IB_MTU_2048,
	IB_MTU_4096
};

/* Octets for an MTU code, or 0 for a code that is not one. */
static inline unsigned ib_mtu_bytes(int code)
{
	return code >= IB_MTU_256 && code <= IB_MTU_4096 ? 128u << code : 0;
}

/* The largest MTU code whose size is at most bytes, or 0 below 256. */
static inline int ib_mtu_code(unsigned bytes)
{
	int code = 0;

	for (int c = IB_MTU_256; c <= IB_MTU_4096; c++)
		if ((128u << c) <= bytes)
			code = c;
	return code;
}

#endif
