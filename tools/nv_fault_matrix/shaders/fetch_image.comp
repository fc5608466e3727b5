#version 450
// Case (d): each invocation reads one texel of a sampled image (texelFetch, no sampler), texels
// `step` apart in row-major order, and writes it to a small live buffer.
#extension GL_EXT_samplerless_texture_functions : require
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) uniform utexture2D victim;
layout(set = 0, binding = 1, std430) buffer Sink { uint words[]; } sink;
layout(push_constant) uniform Pc { uint width; uint step; } pc;
void main() {
    uint gid = gl_GlobalInvocationID.x;
    uint idx = gid * pc.step;
    uvec4 t = texelFetch(victim, ivec2(int(idx % pc.width), int(idx / pc.width)), 0);
    sink.words[gid & 1023u] += t.x;
}
