#version 450
// Keeps the GPU busy for a measured while before the faulting dispatch runs, so that the host frees
// the victim's memory while this part still runs. One workgroup, a dependent integer chain of
// `iters` steps per invocation; the result goes to a small live buffer so it cannot be removed.
layout(local_size_x = 32) in;
layout(set = 0, binding = 0, std430) buffer Sink { uint words[]; } sink;
layout(push_constant) uniform Pc { uint iters; } pc;
void main() {
    uint x = gl_GlobalInvocationID.x + 1u;
    for (uint i = 0u; i < pc.iters; i++) {
        x = x * 1664525u + 1013904223u;
    }
    sink.words[gl_GlobalInvocationID.x & 1023u] = x;
}
