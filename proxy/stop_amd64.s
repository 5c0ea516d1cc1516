#include "textflag.h"

// STOPS sets each byte of m whose byte of x a string scan stops at to
// 0xff, and gives the others their top bit from x: m's top bits are the
// stops. X1, X2 and X3 hold '"', '\\' and 0x1f in every byte; t and u
// are clobbered. Only X0-X12 are used: X15 is Go's zero register.
#define STOPS(x, m, t, u) \
	MOVO x, m; \
	PCMPEQB X1, m; \
	MOVO x, t; \
	PCMPEQB X2, t; \
	MOVO x, u; \
	PMINUB X3, u; \
	PCMPEQB x, u; \
	POR t, m; \
	POR u, m; \
	POR x, m

// func stopIndex(b []byte) int
//
// SSE2, which every amd64 has. Each 16 bytes: compare with '"' and '\\',
// find the bytes below 0x20 as those equal to their minimum with 0x1f, OR
// the three masks with the bytes themselves (a non-ASCII byte has its top
// bit set) and take the top bits. The last 16 bytes are loaded again,
// overlapping, with the bits of the bytes already checked shifted out.
TEXT ·stopIndex(SB), NOSPLIT, $0-32
	MOVQ b_base+0(FP), SI
	MOVQ b_len+8(FP), BX
	XORQ AX, AX

	MOVQ $0x2222222222222222, DX
	MOVQ DX, X1
	PUNPCKLQDQ X1, X1
	MOVQ $0x5c5c5c5c5c5c5c5c, DX
	MOVQ DX, X2
	PUNPCKLQDQ X2, X2
	MOVQ $0x1f1f1f1f1f1f1f1f, DX
	MOVQ DX, X3
	PUNPCKLQDQ X3, X3

	CMPQ BX, $16
	JB   short

big:
	// 64 bytes a round while they last: four loads, one test.
	LEAQ 64(AX), CX
	CMPQ CX, BX
	JA   loop
	MOVOU (SI)(AX*1), X0
	MOVOU 16(SI)(AX*1), X7
	MOVOU 32(SI)(AX*1), X8
	MOVOU 48(SI)(AX*1), X9
	STOPS(X0, X4, X5, X6)
	STOPS(X7, X10, X5, X6)
	STOPS(X8, X11, X5, X6)
	STOPS(X9, X12, X5, X6)
	POR X10, X4
	POR X12, X11
	POR X11, X4
	PMOVMSKB X4, DX
	TESTL DX, DX
	JNZ  loop // the stop is in these 64: find it 16 at a time
	MOVQ CX, AX
	JMP  big

loop:
	LEAQ 16(AX), CX
	CMPQ CX, BX
	JA   last
	MOVOU (SI)(AX*1), X0
	STOPS(X0, X4, X5, X6)
	PMOVMSKB X4, DX
	TESTL DX, DX
	JNZ  found
	MOVQ CX, AX
	JMP  loop

last:
	// 1 to 15 bytes are left: check b[len-16:], without the bytes
	// before AX.
	CMPQ AX, BX
	JAE  none
	LEAQ -16(BX), DI
	MOVOU (SI)(DI*1), X0
	STOPS(X0, X4, X5, X6)
	PMOVMSKB X4, DX
	MOVQ AX, CX
	SUBQ DI, CX
	SHRL CX, DX
	TESTL DX, DX
	JZ   none

found:
	BSFL DX, DX
	ADDQ DX, AX
	MOVQ AX, ret+24(FP)
	RET

none:
	MOVQ BX, ret+24(FP)
	RET

short:
	// Fewer than 16 bytes: one at a time.
	CMPQ AX, BX
	JAE  none
	MOVBLZX (SI)(AX*1), DX
	CMPB DL, $0x22
	JEQ  done
	CMPB DL, $0x5c
	JEQ  done
	CMPB DL, $0x20
	JB   done
	CMPB DL, $0x80
	JAE  done
	INCQ AX
	JMP  short

done:
	MOVQ AX, ret+24(FP)
	RET
