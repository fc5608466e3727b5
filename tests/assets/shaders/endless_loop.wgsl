// A game's material whose fragment shader loops until a uniform says stop (tests/shader_hang.rs).
// With `stop_after` = 0xffffffff the exit test `stop_after < i` is never true for a u32 counter, which
// wraps: a shader that never ends. Each pass of the loop is real work whose result feeds the next
// and the colour, so no compiler can drop or shorten it.
//
// llvmpipe (lavapipe) ends every shader invocation's loops after 65,535 iterations in all (Mesa's
// gallivm loop limiter, LP_MAX_TGSI_LOOP_ITERATIONS): there the endless loop stops at that count, so
// each iteration is made expensive enough (96 dependent sin/cos) that one frame of this material on
// lavapipe keeps its CPU threads busy for far longer than the test's hang timeout (24 were not enough:
// a frame took about 3 s on a 2-core machine, as long as the timeout). On a real GPU the loop
// never ends (naga's loop bounding would stop it after 2^64 iterations).
#import bevy_pbr::forward_io::VertexOutput

struct EndlessParams {
    color: vec4<f32>,
    stop_after: u32,
}

@group(#{MATERIAL_BIND_GROUP}) @binding(0) var<uniform> params: EndlessParams;

fn churn(v: f32) -> f32 {
    var x = v;
    x = sin(x * 1.10 + 0.30);
    x = cos(x * 1.70 - 0.20);
    x = sin(x * 1.17 + 0.41);
    x = cos(x * 1.65 - 0.25);
    x = sin(x * 1.24 + 0.52);
    x = cos(x * 1.60 - 0.30);
    x = sin(x * 1.31 + 0.63);
    x = cos(x * 1.55 - 0.35);
    x = sin(x * 1.38 + 0.74);
    x = cos(x * 1.50 - 0.40);
    x = sin(x * 1.45 + 0.85);
    x = cos(x * 1.45 - 0.45);
    x = sin(x * 1.52 + 0.96);
    x = cos(x * 1.40 - 0.50);
    x = sin(x * 1.59 + 1.07);
    x = cos(x * 1.35 - 0.55);
    x = sin(x * 1.66 + 1.18);
    x = cos(x * 1.30 - 0.60);
    x = sin(x * 1.73 + 1.29);
    x = cos(x * 1.25 - 0.65);
    x = sin(x * 1.80 + 1.40);
    x = cos(x * 1.20 - 0.70);
    x = sin(x * 1.87 + 1.51);
    x = cos(x * 1.15 - 0.75);
    return x;
}

@fragment
fn fragment(mesh: VertexOutput) -> @location(0) vec4<f32> {
    var i: u32 = 0u;
    var glow: f32 = mesh.uv.x;
    loop {
        if (params.stop_after < i) {
            break;
        }
        glow = churn(churn(churn(churn(glow + f32(i & 7u) * 0.125))));
        i = i + 1u;
    }
    return vec4<f32>(params.color.rgb * (0.75 + 0.25 * glow), params.color.a);
}
