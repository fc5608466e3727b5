#version 450
// Case (e): a loop that never ends. `i` is reset to 0 whenever it reaches `wrap`, and the loop only
// ends at `limit` (the host passes limit > wrap), which the compiler cannot know from the source.
layout(local_size_x = 32) in;
layout(set = 0, binding = 0, std430) buffer Sink { uint words[]; } sink;
layout(push_constant) uniform Pc { uint wrap; uint limit; } pc;
void main() {
    uint x = gl_GlobalInvocationID.x + 1u;
    for (uint i = 0u; i < pc.limit; i++) {
        x = x * 1664525u + 1013904223u;
        if (i == pc.wrap) { i = 0u; }
    }
    sink.words[gl_GlobalInvocationID.x & 1023u] = x;
}
