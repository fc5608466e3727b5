#version 450
// Case (a): each invocation writes one word through a storage-buffer descriptor, `stride_words`
// apart, so 65,536 invocations touch every 4 KiB page of a 256 MiB buffer.
layout(local_size_x = 64) in;
layout(set = 0, binding = 0, std430) buffer Victim { uint words[]; } victim;
layout(push_constant) uniform Pc { uint stride_words; uint value; } pc;
void main() {
    uint gid = gl_GlobalInvocationID.x;
    victim.words[gid * pc.stride_words] = pc.value + gid;
}
