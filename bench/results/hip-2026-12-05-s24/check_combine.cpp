// Host check of mi4_combine_quad (hip_combine.h, branch hip-combine-mlp):
// every token and quad against the one-slot-at-a-time loop it replaced, with
// bad, dropped and other-rank slots whose rows hold NaN garbage, top-k 1..20,
// three output dtypes, and output pointers aligned and not (the host does
// not fault on a misaligned store, so only the bits are checked here).
// Needs CUDA's headers for the vector types (device functions compile as
// host code with shims.h); from a tree of the branch:
//   g++ -std=c++17 -O1 -w -I bench/results/hip-2026-12-05-s24 -I src -I include \
//     -I /usr/local/cuda/include bench/results/hip-2026-12-05-s24/check_combine.cpp && ./a.out
// Session 24: 18816 outputs, 0 differ; with every slot added (the skip
// removed) 42 of 42 cases differ.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "shims.h"
#include "backends/hip/hip_combine.h"

static uint32_t rng_state = 12345;
static uint32_t rnd() { rng_state = rng_state * 1664525u + 1013904223u; return rng_state >> 8; }

int main()
{
    long bad = 0, checked = 0;
    for (int topk : {1, 2, 3, 8, 9, 16, 20})
        for (int dt = 0; dt < 3; dt++)
            for (int misalign = 0; misalign < 2; misalign++) {
                const int E = 24, hidden = 64;
                const int64_t M = 7;
                const int64_t slots = M * topk;
                std::vector<int32_t> ids(slots), map(E);
                std::vector<float> tw(slots), y(slots * hidden);
                for (int e = 0; e < E; e++) map[e] = (e % 3 == 2) ? -1 : e / 2;
                for (int64_t s = 0; s < slots; s++) {
                    uint32_t r = rnd() % 10;
                    ids[s] = r == 0 ? 99 : r == 1 ? -3 : (int)(rnd() % E);
                    tw[s] = r == 2 ? NAN : 0.5f;
                }
                for (auto &v : y) {
                    uint32_t r = rnd();
                    v = (r % 5 == 0) ? NAN : ((float)(int)(r % 2001) - 1000.0f) * 0.37f;
                }
                mi4_slot_check check{};
                check.topk_ids = ids.data();
                check.topk_weights = tw.data();
                check.expert_map = map.data();
                check.num_experts = E;
                check.topk = topk;
                const moeint4_dtype dtype = dt == 0 ? MOEINT4_DTYPE_F32 : dt == 1 ? MOEINT4_DTYPE_F16 : MOEINT4_DTYPE_BF16;
                const size_t esize = dt == 0 ? 4 : 2;
                std::vector<unsigned char> out_buf(M * hidden * esize + 64), want_buf(M * hidden * esize + 64);
                unsigned char *out = out_buf.data() + 16 + misalign * esize; // misaligned by one element
                unsigned char *want = want_buf.data() + 16;
                mi4_combine_params c{};
                c.y = y.data(); c.check = check; c.num_tokens = M; c.topk = topk; c.hidden = hidden;
                c.out = out; c.dtype = dtype;
                for (int64_t m = 0; m < M; m++)
                    for (int k = 0; k < hidden; k += 4) {
                        mi4_combine_quad(c, m, k);
                        float sum[4] = {0, 0, 0, 0};
                        for (int j = 0; j < topk; j++) {
                            int64_t slot = m * topk + j;
                            if (mi4_slot_local(check, slot) < 0) continue;
                            for (int q = 0; q < 4; q++) sum[q] += y[slot * hidden + k + q];
                        }
                        for (int q = 0; q < 4; q++) {
                            size_t at = (size_t)(m * hidden + k + q);
                            if (dt == 0) memcpy(want + at * 4, &sum[q], 4);
                            else {
                                uint16_t h = dt == 1 ? mi4_dev_f32_to_f16(sum[q]) : mi4_dev_f32_to_bf16(sum[q]);
                                memcpy(want + at * 2, &h, 2);
                            }
                        }
                    }
                checked += M * hidden;
                if (memcmp(out, want, M * hidden * esize) != 0) {
                    bad++;
                    printf("topk %d dtype %d misalign %d: differs\n", topk, dt, misalign);
                }
            }
    printf("%ld outputs checked, %ld cases differ\n", checked, bad);
    return bad != 0;
}
