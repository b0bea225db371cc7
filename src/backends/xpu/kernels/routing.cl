/* Routing: token-slots (m, j) -> local experts, then a counting sort of the
 * slots by expert. route[] holds, for E local experts:
 *   [0, E)        counts
 *   [E, 2E+1)     offsets (exclusive prefix sum, offsets[E] = slots routed here)
 *   [2E+1, 3E+1)  cursors used by the scatter
 *   [3E+1]        first bad slot (INT_MAX when every id is in range)
 * The order of slots inside one expert depends on atomics, but every slot's
 * result is computed independently of its position, so outputs are
 * deterministic. */

__kernel void mi4_route_init(__global int *route, int num_local)
{
    int i = (int)get_global_id(0);
    if (i < 3 * num_local + 1)
        route[i] = 0;
    else if (i == 3 * num_local + 1)
        route[i] = INT_MAX;
}

/* One work-item per slot: bounds-check the global id (the host cannot read
 * device memory before the launch), map it through expert_map, count it. */
__kernel void mi4_route_count(__global const int *topk_ids, __global const int *expert_map,
                              int num_slots, int num_experts, int num_local,
                              __global int *slot_expert, __global int *route)
{
    int slot = (int)get_global_id(0);
    if (slot >= num_slots)
        return;
    int global_id = topk_ids[slot];
    int local_id = -1;
    if (global_id < 0 || global_id >= num_experts)
        atomic_min(&route[3 * num_local + 1], slot);
    else
        local_id = expert_map[global_id];
    slot_expert[slot] = local_id;
    if (local_id >= 0)
        atomic_inc(&route[local_id]);
}

/* A sequential scan: E is at most a few hundred, one work-item suffices. */
__kernel void mi4_route_scan(__global int *route, int num_local)
{
    if (get_global_id(0) != 0)
        return;
    int running = 0;
    for (int e = 0; e < num_local; ++e) {
        route[num_local + e] = running;
        route[2 * num_local + 1 + e] = running;
        running += route[e];
    }
    route[2 * num_local] = running;
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
