#include "layout/cpu_repack.h"

#include <string.h>

#include "base/half.h"

static size_t round_up(size_t value, size_t multiple)
{
    return (value + multiple - 1) / multiple * multiple;
}

mi4_cpu_pack_geometry mi4_cpu_pack_geometry_make(int in_features, int rows, int group_size)
{
    mi4_cpu_pack_geometry geo;
    memset(&geo, 0, sizeof geo);
    geo.in_features = in_features;
    geo.in_blocks = (in_features + MI4_CPU_BLOCK_COLUMNS - 1) / MI4_CPU_BLOCK_COLUMNS;
    if (group_size == -1) {
        geo.num_groups = 1;
        geo.group_blocks = geo.in_blocks;
    } else {
        geo.num_groups = in_features / group_size;
        geo.group_blocks = group_size / MI4_CPU_BLOCK_COLUMNS;
    }
    geo.rows = rows;
    geo.tiles = (rows + MI4_CPU_TILE_ROWS - 1) / MI4_CPU_TILE_ROWS;
    geo.scales_offset = (size_t)geo.in_blocks * MI4_CPU_BLOCK_BYTES;
    geo.zeros_offset = geo.scales_offset + (size_t)geo.num_groups * MI4_CPU_TILE_ROWS * 2;
    geo.tile_bytes =
        round_up(geo.zeros_offset + (size_t)geo.num_groups * MI4_CPU_TILE_ROWS, MI4_CPU_TILE_ALIGN);
    return geo;
}

static void store_u32_le(uint8_t *dst, uint32_t value)
{
    dst[0] = (uint8_t)value;
    dst[1] = (uint8_t)(value >> 8);
    dst[2] = (uint8_t)(value >> 16);
    dst[3] = (uint8_t)(value >> 24);
}

static void store_u16_le(uint8_t *dst, uint16_t value)
{
    dst[0] = (uint8_t)value;
    dst[1] = (uint8_t)(value >> 8);
}

static void repack_tile(const mi4_cpu_pack_geometry *geo, int row0, const uint8_t *codes,
                        size_t code_stride, const uint8_t *zeros, const float *scales,
                        size_t group_stride, moeint4_dtype scales_dtype, uint8_t *tile)
{
    memset(tile, 0, geo->tile_bytes);
    for (int r = 0; r < MI4_CPU_TILE_ROWS && row0 + r < geo->rows; r++) {
        const uint8_t *row_codes = codes + (size_t)(row0 + r) * code_stride;
        for (int b = 0; b < geo->in_blocks; b++) {
            uint32_t word = 0;
            for (int c = 0; c < MI4_CPU_BLOCK_COLUMNS; c++) {
                int column = b * MI4_CPU_BLOCK_COLUMNS + c;
                if (column < geo->in_features)
                    word |= (uint32_t)(row_codes[column] & 15u) << (4 * c);
            }
            store_u32_le(tile + (size_t)b * MI4_CPU_BLOCK_BYTES + 4 * (size_t)r, word);
        }
        for (int g = 0; g < geo->num_groups; g++) {
            size_t at = (size_t)g * group_stride + (size_t)(row0 + r);
            float scale = scales[at];
            uint16_t bits =
                scales_dtype == MOEINT4_DTYPE_BF16 ? mi4_f32_to_bf16(scale) : mi4_f32_to_f16(scale);
            store_u16_le(tile + geo->scales_offset + ((size_t)g * MI4_CPU_TILE_ROWS + r) * 2, bits);
            tile[geo->zeros_offset + (size_t)g * MI4_CPU_TILE_ROWS + r] = zeros[at];
        }
    }
}

void mi4_cpu_repack(const mi4_cpu_pack_geometry *geo, const uint8_t *codes, size_t code_stride,
                    const uint8_t *zeros, const float *scales, size_t group_stride,
                    moeint4_dtype scales_dtype, uint8_t *dst)
{
    for (int t = 0; t < geo->tiles; t++)
        repack_tile(geo, t * MI4_CPU_TILE_ROWS, codes, code_stride, zeros, scales, group_stride,
                    scales_dtype, dst + (size_t)t * geo->tile_bytes);
}
