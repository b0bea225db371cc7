/* The arithmetic behind the int4 wgmma tiles' rounded A fragments
 * (q_dequant<true>, hip_int4_wgmma_ops.h), checked on the host for every
 * positive finite f16 and bf16 scale s and every q - zero v in [-16, 15]:
 *   hi = bf16(s); lo = s - hi in f32 is exact and is a bf16;
 *   p = v * lo is exact in bf16 (what the first bf16x2 FMA returns);
 *   bf16(v * hi + p), rounded once (the second FMA), equals the BF16 mode's
 *   bf16(f32(v * s)).
 * The device's own check of the code is test_hip_dequant's
 * test_rounded_pairs. Build: cc -O2 check_split_scale.c -lm; exit 0 = all
 * equal. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static uint32_t bits_of(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

static float float_of(uint32_t b)
{
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* f32 to bf16, round to nearest even (finite values) */
static uint16_t bf16_of_float(float f)
{
    uint32_t b = bits_of(f);
    return (uint16_t)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

static float float_of_bf16(uint16_t h) { return float_of((uint32_t)h << 16); }

/* An exact value (a double holding it) to bf16, rounded once to nearest even. */
static uint16_t bf16_of_exact(double d)
{
    if (d == 0)
        return signbit(d) ? 0x8000u : 0;
    int e;
    double m = ldexp(frexp(fabs(d), &e), 8), whole = floor(m), rest = m - whole;
    if (rest > 0.5 || (rest == 0.5 && fmod(whole, 2.0) == 1.0))
        whole += 1;
    float f = (float)ldexp(whole, e - 8);
    return bf16_of_float(d < 0 ? -f : f);
}

static float float_of_f16(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    float v = e == 0 ? ldexpf((float)m, -24) : ldexpf((float)(m | 1024), e - 25);
    return (h & 0x8000u) ? -v : v;
}

int main(void)
{
    long checked = 0, bad = 0;
    for (int bf16 = 0; bf16 < 2; bf16++)
        for (uint32_t bits = 1; bits < 0x8000u; bits++) {
            uint32_t exponent = bf16 ? 0x7f80u : 0x7c00u;
            if ((bits & exponent) == exponent)
                continue; /* inf, NaN: prepare refuses them */
            float s = bf16 ? float_of_bf16((uint16_t)bits) : float_of_f16((uint16_t)bits);
            float hi = float_of_bf16(bf16_of_float(s)), lo = s - hi;
            if ((double)lo != (double)s - (double)hi || (bits_of(lo) & 0xffffu) != 0) {
                printf("%s scale 0x%04x: lo is not an exact bf16\n", bf16 ? "bf16" : "f16", bits);
                bad++;
                continue;
            }
            for (int v = -16; v <= 15; v++) {
                double p = (double)v * lo;
                if ((bits_of((float)p) & 0xffffu) != 0 || (double)(float)p != p) {
                    printf("scale 0x%04x, v %d: v * lo is not an exact bf16\n", bits, v);
                    bad++;
                    continue;
                }
                uint16_t got = bf16_of_exact((double)v * hi + p);
                uint16_t want = bf16_of_float((float)v * s);
                checked++;
                if (got != want) {
                    if (bad < 10)
                        printf("%s scale 0x%04x, v %d: 0x%04x, want 0x%04x\n",
                               bf16 ? "bf16" : "f16", bits, v, got, want);
                    bad++;
                }
            }
        }
    printf("%ld pairs of scale and v checked, %ld differ\n", checked, bad);
    return bad != 0;
}
