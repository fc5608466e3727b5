#version 460
// Cases (b) and (c): each invocation writes one word through a raw buffer device address taken
// from the push constants: base + gid * stride_bytes.
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
layout(local_size_x = 64) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Word { uint w; };
layout(push_constant) uniform Pc { uint64_t base; uint stride_bytes; uint value; } pc;
void main() {
    uint gid = gl_GlobalInvocationID.x;
    Word p = Word(pc.base + uint64_t(gid) * uint64_t(pc.stride_bytes));
    p.w = pc.value + gid;
}
