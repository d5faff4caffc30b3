#!/usr/bin/env python3
"""DeepSpeed's own model-state estimates for SeqGPT-560M, for docs/memory.md.

Calls deepspeed.runtime.zero.stage_1_and_2.estimate_zero2_model_states_mem_needs and
stage3.estimate_zero3_model_states_mem_needs (the functions behind the *_all_cold
estimators, which take the parameter counts instead of a model) on the CPU, for each
machine docs/memory.md shows, and prints one Markdown table. Needs the `deepspeed` package
(pip install deepspeed); nothing in the build or the tests runs this.

Usage: deepspeed_estimates.py
"""
import contextlib
import io

# SeqGPT-560M (BLOOMZ-560M): 559,214,592 parameters; the largest layer is the tied
# embedding table, 250,880 x 1024.
TOTAL = 559_214_592
LARGEST = 250_880 * 1024
MACHINES = [("4 x RTX 4090 24 GB", 4), ("8 x A100 40 GB", 8), ("2 x RTX 3090 24 GB", 2),
            ("8 x H200", 8)]
GIB = 2**30


def main():
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        import deepspeed
        from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs
        from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
    print(f"deepspeed {deepspeed.__version__}; total_params {TOTAL:,}, "
          f"largest_layer_params {LARGEST:,}; GiB per GPU / host GiB (additional_buffer_factor 1.5)\n")
    print("| machine | ZeRO-2 | ZeRO-2 + offload optimizer | ZeRO-3 | ZeRO-3 + offload optimizer "
          "| ZeRO-3 + offload optimizer + params |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, n in MACHINES:
        cells = []
        for off in (False, True):
            cpu, gpu = estimate_zero2_model_states_mem_needs(TOTAL, num_gpus_per_node=n,
                                                             cpu_offload=off)
            cells.append(f"{gpu / GIB:.2f} / {cpu / GIB:.2f}")
        for off, off_params in ((False, False), (True, False), (True, True)):
            cpu, gpu, _ = estimate_zero3_model_states_mem_needs(
                TOTAL, LARGEST, num_gpus_per_node=n, cpu_offload=off,
                cpu_offload_params=off_params, zero_init=True)
            cells.append(f"{gpu / GIB:.2f} / {cpu / GIB:.2f}")
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
