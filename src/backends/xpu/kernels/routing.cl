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

/* Clears the route table; with reset_errors also the error record. */
__kernel void mi4_route_init(__global int *route, int num_local, __global int *errors,
                             int reset_errors)
{
    int i = (int)get_global_id(0);
    if (i < MI4_ROUTE_INTS(num_local))
        route[i] = 0;
    if (reset_errors && i < 2)
        errors[i] = INT_MAX;
}

/* One work-item per slot: bounds-check the global id and the router weight
 * (the host cannot read device memory), map the id through expert_map,
 * count it. slot_base numbers the slots of this chunk within the forward. */
__kernel void mi4_route_count(__global const int *topk_ids, __global const float *topk_weights,
                              __global const int *expert_map, int num_slots, int slot_base,
                              int num_experts, int num_local, __global int *slot_expert,
                              __global int *route, __global int *errors)
{
    int slot = (int)get_global_id(0);
    if (slot >= num_slots)
        return;
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

/* A sequential scan: E is at most a few hundred, one work-item suffices.
 * Experts with at least dnnl_min_rows slots get no tiles (oneDNN serves
 * them); nothing gets tiles once the error record is set. */
__kernel void mi4_route_scan(__global int *route, int num_local, int dnnl_min_rows,
                             __global const int *errors, int gated)
{
    if (get_global_id(0) != 0)
        return;
    __global int *tile_offsets = MI4_TILE_OFFSETS(route, num_local);
    int running = 0, tiles = 0, failed = gated && mi4_errors_set(errors);
    for (int e = 0; e < num_local; ++e) {
        int rows = route[e];
        route[num_local + e] = running;
        route[2 * num_local + 1 + e] = running;
        tile_offsets[e] = tiles;
        running += rows;
        if (!failed && rows < dnnl_min_rows)
            tiles += (rows + MI4_TILE_ROWS - 1) / MI4_TILE_ROWS;
    }
    route[2 * num_local] = running;
    tile_offsets[num_local] = tiles;
}

__kernel void mi4_route_scatter(__global const int *slot_expert, int num_slots, int num_local,
                                __global int *route, __global int *sorted_slots)
{
    int slot = (int)get_global_id(0);
    if (slot >= num_slots)
        return;
    int local_id = slot_expert[slot];
    if (local_id < 0)
        return;
    int position = atomic_inc(&route[2 * num_local + 1 + local_id]);
    sorted_slots[position] = slot;
}

/* The expert and first sorted row of GEMM tile `tile`; 0 when the tile is
 * past the end (the launch covers the most tiles a chunk can have). */
int mi4_find_tile(__global const int *route, int num_local, int tile, int *expert, int *row0)
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
    *row0 = route[num_local + lo] + (tile - tile_offsets[lo]) * MI4_TILE_ROWS;
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
