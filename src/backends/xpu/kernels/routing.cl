/* Routing: token-slots (m, j) -> local experts, a counting sort of the slots
 * by expert and the list of GEMM tiles, all on the device (the host reads
 * nothing back). route[] holds, for E local experts:
 *   [0, E)         counts
 *   [E, 2E+1)      offsets (exclusive prefix sum, offsets[E] = slots routed here)
 *   [2E+1, 3E+1)   cursors used by the scatter
 *   [3E+1, 4E+2)   tile offsets: expert e owns GEMM tiles [t[e], t[e+1]),
 *                  t[E] = tiles in all
 * errors[] is the forward's error record, kept across chunks:
 *   [0] first slot whose expert id is outside [0, num_experts)
 *   [1] first slot whose router weight is not finite
 * (INT_MAX when none). A bad slot contributes nothing. Gated (synchronous
 * forwards) the GEMMs get no tiles and the combine writes nothing while the
 * record is set, so a bad input leaves the output untouched; ungated
 * (asynchronous forwards) the other slots are computed as usual and
 * mi4_record_merge keeps the first bad slot in the weights' sticky record.
 * The order of slots inside one expert depends on atomics, but every slot's
 * result is computed independently of its position, so outputs are
 * deterministic. */

#define MI4_ROUTE_INTS(e) (4 * (e) + 2)
#define MI4_TILE_OFFSETS(route, e) ((route) + 3 * (e) + 1)

int mi4_errors_set(__global const int *errors)
{
    return errors[0] != INT_MAX || errors[1] != INT_MAX;
}

/* The whole routing of a chunk in one launch of one work-group of
 * MI4_GROUP work-items (phases separated by barriers; global memory is
 * only shared within the group, so barriers order it):
 *   1. clear the route table (with reset_errors also the error record);
 *   2. per slot: bounds-check the global id and the router weight (the host
 *      cannot read device memory), map the id through expert_map, count it;
 *      slot_base numbers the slots of this chunk within the forward;
 *   3. (sort) offsets, cursors and the GEMM tile list (tiles of tile_rows
 *      slots: MI4_TILE_ROWS for the GEMMs, 1 for the GEMVs): each work-item sums
 *      a run of experts, a scan in local memory places the runs. Experts
 *      with at least dnnl_min_rows slots get no tiles (oneDNN serves
 *      them); nothing gets tiles once the error record is set (gated);
 *   4. (sort) scatter the slots into sorted_slots by expert.
 * Counts, cursors and the error record are read through atomics: they are
 * written by atomics of other work-items. */
__kernel __attribute__((reqd_work_group_size(MI4_GROUP, 1, 1)))
void mi4_route(__global const int *topk_ids, __global const float *topk_weights,
               __global const int *expert_map, int num_slots, int slot_base, int num_experts,
               int num_local, int dnnl_min_rows, int tile_rows, int gated, int reset_errors,
               int sort,
               __global int *slot_expert, __global int *route, __global int *sorted_slots,
               __global int *errors)
{
    __local int run_rows[MI4_GROUP], run_tiles[MI4_GROUP];
    int lid = (int)get_local_id(0);
    if (get_group_id(0) != 0)
        return; /* launched as one work-group */
    for (int i = lid; i < MI4_ROUTE_INTS(num_local); i += MI4_GROUP)
        route[i] = 0;
    if (reset_errors && lid < 2)
        errors[lid] = INT_MAX;
    barrier(CLK_GLOBAL_MEM_FENCE);

    for (int slot = lid; slot < num_slots; slot += MI4_GROUP) {
        int global_id = topk_ids[slot];
        int local_id = -1;
        if (global_id < 0 || global_id >= num_experts)
            atomic_min(&errors[0], slot_base + slot);
        else
            local_id = expert_map[global_id];
        if (!isfinite(topk_weights[slot])) { /* contributes nothing either */
            atomic_min(&errors[1], slot_base + slot);
            local_id = -1;
        }
        slot_expert[slot] = local_id;
        if (local_id >= 0)
            atomic_inc(&route[local_id]);
    }
    barrier(CLK_GLOBAL_MEM_FENCE);
    if (!sort)
        return;

    int failed = gated && (atomic_or(&errors[0], 0) != INT_MAX || atomic_or(&errors[1], 0) != INT_MAX);
    int per = (num_local + MI4_GROUP - 1) / MI4_GROUP;
    int e0 = min(lid * per, num_local), e1 = min(e0 + per, num_local);
    int rows = 0, tiles = 0;
    for (int e = e0; e < e1; ++e) {
        int count = atomic_or(&route[e], 0);
        rows += count;
        if (!failed && count < dnnl_min_rows)
            tiles += (count + tile_rows - 1) / tile_rows;
    }
    run_rows[lid] = rows;
    run_tiles[lid] = tiles;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int step = 1; step < MI4_GROUP; step <<= 1) { /* inclusive scan */
        int add_rows = lid >= step ? run_rows[lid - step] : 0;
        int add_tiles = lid >= step ? run_tiles[lid - step] : 0;
        barrier(CLK_LOCAL_MEM_FENCE);
        run_rows[lid] += add_rows;
        run_tiles[lid] += add_tiles;
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    __global int *tile_offsets = MI4_TILE_OFFSETS(route, num_local);
    int running = run_rows[lid] - rows, tile = run_tiles[lid] - tiles;
    for (int e = e0; e < e1; ++e) {
        int count = atomic_or(&route[e], 0);
        route[num_local + e] = running;
        route[2 * num_local + 1 + e] = running;
        tile_offsets[e] = tile;
        running += count;
        if (!failed && count < dnnl_min_rows)
            tile += (count + tile_rows - 1) / tile_rows;
    }
    if (lid == MI4_GROUP - 1) {
        route[2 * num_local] = run_rows[lid];
        tile_offsets[num_local] = run_tiles[lid];
    }
    barrier(CLK_GLOBAL_MEM_FENCE);

    for (int slot = lid; slot < num_slots; slot += MI4_GROUP) {
        int local_id = slot_expert[slot]; /* written by this work-item above */
        if (local_id >= 0)
            sorted_slots[atomic_inc(&route[2 * num_local + 1 + local_id])] = slot;
    }
}

/* The expert and first sorted row of GEMM tile `tile` (tiles of tile_rows
 * slots); 0 when the tile is past the end (the launch covers the most tiles
 * a chunk can have). */
int mi4_find_tile(__global const int *route, int num_local, int tile, int tile_rows, int *expert,
                  int *row0)
{
    __global const int *tile_offsets = MI4_TILE_OFFSETS(route, num_local);
    if (tile >= tile_offsets[num_local])
        return 0;
    int lo = 0, hi = num_local - 1; /* the last expert whose tiles start at or before `tile` */
    while (lo < hi) {
        int mid = (lo + hi + 1) >> 1;
        if (tile_offsets[mid] <= tile)
            lo = mid;
        else
            hi = mid - 1;
    }
    *expert = lo;
    *row0 = route[num_local + lo] + (tile - tile_offsets[lo]) * tile_rows;
    return 1;
}

/* End of an asynchronous forward: the sticky record (kind: 0 none, 1 id,
 * 2 weight; slot; the value's bits; topk) takes this forward's first bad
 * slot unless it already holds one. One work-item. */
__kernel void mi4_record_merge(__global const int *errors, __global const int *topk_ids,
                               __global const float *topk_weights, int topk,
                               __global int *sticky)
{
    if (get_global_id(0) != 0 || sticky[0] != 0 || !mi4_errors_set(errors))
        return;
    int id_first = errors[0] <= errors[1];
    int slot = id_first ? errors[0] : errors[1];
    sticky[0] = id_first ? 1 : 2;
    sticky[1] = slot;
    sticky[2] = id_first ? topk_ids[slot] : as_int(topk_weights[slot]);
    sticky[3] = topk;
}

/* Act-order weights (sorted into contiguous groups at prepare): each local
 * slot's input row gathered by its expert's sort order, as f32 (exact),
 * gathered[slot][k] = x[slot / topk][input_perm[e][k]]; the GEMMs then read
 * one row per slot (topk 1, dtype f32). Slots of other experts and bad
 * slots (slot_expert < 0) are skipped: nothing reads their rows. */
__kernel void mi4_gather_input(__global const int *slot_expert, __global const int *input_perm,
                               __global const uchar *hidden, int dtype, int num_slots, int topk,
                               int K, __global float *gathered)
{
    int k = (int)get_global_id(0);
    int slot = (int)get_global_id(1);
    if (k >= K || slot >= num_slots)
        return;
    int e = slot_expert[slot];
    if (e < 0)
        return;
    gathered[(long)slot * K + k] =
        mi4_load(hidden, dtype, (long)(slot / topk) * K + input_perm[(long)e * K + k]);
}
