// The constants that the kernels and the Rust code sizing and launching them must agree on. Only
// plain integer #defines: build.rs turns them into Rust constants (crate::cuda::config), so
// neither side keeps a copy of the other's numbers.
#pragma once

// Threads per CTA of every device kernel (each launch uses this many).
#define GB_THREADS 512

// nvl-ll128: a warp-wide store covers a pack of 512 staging bytes (4 lines of 128) carrying 480
// payload bytes (each line 7 x 16 + 8, its last 8 bytes the flag); a work item is 4 packs.
#define GB_LL128_PACK 512
#define GB_LL128_PACK_DATA 480
#define GB_LL128_UNROLL 4

// EP: tokens per chunk of the deterministic layout (a warp's lanes), and channels per FP8 scale.
#define GB_EP_CHUNK 32
#define GB_EP_FP8_GROUP 128
// EP receive descriptor: (source rank, token, top-k slot) in one word, the slot in the low bits.
#define GB_EP_DESC_SLOT_BITS 4
#define GB_EP_DESC_TOKEN_BITS 16
// EP: the byte every combine output buffer is filled with before the combines (a BF16 NaN that no
// reduction produces), so a row written past the tokens is seen.
#define GB_EP_POISON_BYTE 0xff
