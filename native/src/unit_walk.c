/* Units started by byte strings walked through one unit's U* automaton (the counted back-ends'
 * long-token tables, decoding.backends.counted._UnitWalk). */
#include "gd_native.h"

int gd_unit_walk(const int32_t *step, const uint8_t *starts, size_t n_states, int32_t q0, const uint8_t *data,
                 size_t n_data, const int64_t *off, const int64_t *len, size_t n, int64_t *count) {
    if (q0 < 0 || (size_t)q0 >= n_states) return -1;
    for (size_t i = 0; i < n_states * 256; i++)
        if (step[i] < -1 || step[i] >= (int64_t)n_states) return -1;
    for (size_t i = 0; i < n; i++)
        if (off[i] < 0 || len[i] < 0 || (uint64_t)off[i] + (uint64_t)len[i] > n_data) return -1;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = data + off[i];
        int64_t c = 0;
        int32_t q = q0;
        for (int64_t j = 0; j < len[i]; j++) {
            size_t cell = (size_t)q * 256 + p[j];
            c += starts[cell] != 0;
            q = step[cell];
            if (q < 0) break;
        }
        count[i] = c;
    }
    return 0;
}
