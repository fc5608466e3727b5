// The shader_hang scene's particle simulation: a compute pass of the game's own, each frame. Its
// work is a short loop on local values (the scene checks only that a report names the pipeline).
@compute @workgroup_size(1)
fn main() {
    var x = 0u;
    for (var i = 0u; i < 16u; i++) {
        x = x * 3u + i;
    }
}
