#!/usr/bin/env bash
# Compiles the compute shaders to the committed .spv files (glslang-tools 12.0.0, Debian 12:
# `apt-get install -y glslang-tools spirv-tools`). SPIR-V 1.5 (Vulkan 1.2 target) for all, which
# buffer_reference needs; spirv-val checks each.
set -euo pipefail
cd "$(dirname "$0")"
for s in busy write_storage write_bda fetch_image endless; do
    glslangValidator --target-env vulkan1.2 -o "$s.spv" "$s.comp"
    spirv-val --target-env vulkan1.2 "$s.spv"
done
