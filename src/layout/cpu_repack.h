/* The CPU backend's weight layout, built from natural-order codes.
 *
 * A projection (OUT rows, IN columns) is cut into tiles of 8 rows; a tile is
 * one contiguous, 64-byte aligned record that a kernel streams front to back:
 *
 *   codes   in_blocks x 32 bytes: block b holds 8 little-endian uint32 words,
 *           word r = row r of the tile, nibble c (bits 4c..4c+3) = code of
 *           column 8b + c. One 32-byte load feeds 8 rows x 8 columns.
 *   scales  num_groups x 8 uint16: scale of (group, row) as f16 or bf16 bits.
 *   zeros   num_groups x 8 uint8: the value subtracted from a code (0..16).
 *
 * Rows past OUT and columns past IN are padding: code 0, scale 0, zero 0, so
 * they contribute nothing whatever the input holds. */
#ifndef MOEINT4_LAYOUT_CPU_REPACK_H
#define MOEINT4_LAYOUT_CPU_REPACK_H

#include <stddef.h>
#include <stdint.h>

#include "moeint4.h"

#define MI4_CPU_TILE_ROWS 8
#define MI4_CPU_BLOCK_COLUMNS 8
#define MI4_CPU_BLOCK_BYTES 32
#define MI4_CPU_TILE_ALIGN 64

typedef struct mi4_cpu_pack_geometry {
    int in_features;  /* IN */
    int in_blocks;    /* ceil(IN / 8) */
    int group_blocks; /* blocks per quantization group (in_blocks when per-channel) */
    int num_groups;
    int rows;             /* OUT */
    int tiles;            /* ceil(OUT / 8) */
    size_t scales_offset; /* byte offsets inside a tile */
    size_t zeros_offset;
    size_t tile_bytes; /* multiple of MI4_CPU_TILE_ALIGN */
} mi4_cpu_pack_geometry;

/* Geometry of a projection with `in_features` columns, `rows` rows and
 * `group_size` (32, 64, 128 or -1). Group sizes are multiples of 8, so a
 * block never straddles two groups. */
mi4_cpu_pack_geometry mi4_cpu_pack_geometry_make(int in_features, int rows, int group_size);

/* Bytes of all tiles of one projection. */
static inline size_t mi4_cpu_pack_bytes(const mi4_cpu_pack_geometry *geo)
{
    return (size_t)geo->tiles * geo->tile_bytes;
}

/* Writes geo->tiles tiles to dst (mi4_cpu_pack_bytes bytes) from natural
 * order arrays (mi4_layout_unpack_expert's shapes) whose first row is the
 * first row to pack:
 *   codes   [row][column] with `code_stride` bytes between rows,
 *   zeros   [group][row] and scales [group][row], `group_stride` elements
 *           between groups.
 * Scales are stored as `scales_dtype` (F16 or BF16) bits; values that came
 * from that dtype round-trip exactly. */
void mi4_cpu_repack(const mi4_cpu_pack_geometry *geo, const uint8_t *codes, size_t code_stride,
                    const uint8_t *zeros, const float *scales, size_t group_stride,
                    moeint4_dtype scales_dtype, uint8_t *dst);

#endif
