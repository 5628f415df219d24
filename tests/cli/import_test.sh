#!/usr/bin/env bash
# simtrain import round-trips the frameworks' published examples (tests/data/import, sources in its README): each
# becomes a scenario that `check` accepts and `run` simulates. Megatron-LM's scripts run as published, with
# `torchrun` standing for simtrain import.
#   import_test.sh SIMTRAIN REPO_ROOT
set -euo pipefail
simtrain=$(realpath "$1")
root=$(realpath "$2")
data=$root/tests/data/import
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# The scenario passes check and run, and the run's JSON report has a step time.
simulates() {
  local file=$1
  shift
  "$simtrain" check "$file" "$@" >/dev/null || fail "check refused $file"
  "$simtrain" run "$file" --quiet --format json "$@" >"$out/report.json" || fail "run failed on $file"
  grep -q '"step_time_s"' "$out/report.json" || fail "no step time for $file"
}

# Megatron-LM: each example script, run by bash from a folder with a pretrain_gpt.py, its torchrun a function.
megatron() {
  local script=$1 gpus=$2 topology=$3
  shift 3
  (
    cd "$out" && touch pretrain_gpt.py
    torchrun() {
      "$simtrain" import megatron --topology "$topology" ${gpus:+--gpus "$gpus"} --out "$out/$script.json" -- \
        torchrun "$@" 2>"$out/$script.err"
    }
    export -f torchrun
    export simtrain topology gpus out script
    bash "$data/megatron/$script.sh" "$@" >/dev/null
  ) || { cat "$out/$script.err"; fail "import megatron $script"; }
  simulates "$out/$script.json"
}
megatron train_gpt3_175b_distributed 1024 dgx-a100 ckpt tb vocab.json merges.txt data
megatron train_llama3_8b_h100_fp8 "" dgx-h100 # 8 GPUs, from the script's torchrun
megatron train_mixtral_8x7b_distributed 64 dgx-h100 ckpt tokenizer.model data
grep -q '"precision": "fp8"' "$out/train_llama3_8b_h100_fp8.json" || fail "llama3 8b is not FP8"
grep -q '"ep": 8' "$out/train_mixtral_8x7b_distributed.json" || fail "mixtral has no expert parallelism"
grep -q "assumed 8 GPUs, from the launcher" "$out/train_llama3_8b_h100_fp8.err" || fail "no note on the GPU count"

# NeMo: NeMo-Framework-Launcher's training files, at their own scale (trainer.num_nodes x devices).
for config in gpt3_175b mixtral_8x7b; do
  "$simtrain" import nemo "$data/nemo/$config.yaml" --topology dgx-h100 --out "$out/$config.json" 2>/dev/null
  simulates "$out/$config.json"
done
"$simtrain" import nemo "$data/nemo/llama3_1_405b.yaml" --topology dgx-h100 --out "$out/nemo405.json" -- \
  trainer.num_nodes=288 --recompute-activations 2>/dev/null
simulates "$out/nemo405.json"
grep -q '"gpus": 2304' "$out/nemo405.json" || fail "the override after -- did not win"
grep -q '"recompute": "selective"' "$out/nemo405.json" || fail "the Megatron-LM argument after -- was not read"

# NeMo fine-tuning: the launcher's LoRA example script as published, its `python3 main.py` a function importing the
# peft stage's overrides over the stage's file, the model the checkpoint holds given with --model.
(
  cd "$out"
  python3() {
    local stage=()
    for a in "$@"; do [[ $a == peft.* || $a == ++peft.* || $a == "~peft."* ]] && stage+=("$a"); done
    "$simtrain" import nemo "$data/nemo/llama_sft.yaml" --model llama2-70b --topology dgx-h100 \
      --out "$out/nemo_lora.json" -- "${stage[@]}" 2>"$out/nemo_lora.err"
  }
  export -f python3
  export simtrain data out
  MODEL=llama2-70b.nemo bash "$data/nemo/70b_1node_lora.sh" >/dev/null
) || { cat "$out/nemo_lora.err"; fail "import nemo of the LoRA script"; }
simulates "$out/nemo_lora.json" --set plan.document_length=200
grep -q '"lora_rank": 32' "$out/nemo_lora.json" || fail "NeMo's LoRA was not read"
grep -q '"distributed_optimizer": false' "$out/nemo_lora.json" || fail "the script's fused_adam did not replace the file's"
grep -q "packed_sequence=true: each packed document" "$out/nemo_lora.err" || fail "no warning on packed sequences"
if "$simtrain" import nemo "$data/nemo/llama_sft.yaml" --topology dgx-h100 --gpus 8 2>"$out/nomodel.err"; then
  fail "a configuration that restores its model imported without --model"
fi
grep -q "does not describe its model" "$out/nomodel.err" || fail "no reason given without --model"

# DeepSpeed: the examples' configs, with a model and what they leave to the script.
"$simtrain" import deepspeed "$data/deepspeed/bf16_master_weight_baseline.json" --model llama2-7b --topology dgx-a100 \
  --gpus 16 --seq-length 2048 --out "$out/zero3.json" 2>/dev/null
simulates "$out/zero3.json"
"$simtrain" import deepspeed "$data/deepspeed/autotp_ds_config.json" --model llama2-7b --topology dgx-h100 --gpus 16 \
  --micro-batch 1 --global-batch 64 --out "$out/autotp.json" 2>/dev/null
simulates "$out/autotp.json"
"$simtrain" import deepspeed "$data/deepspeed/zenflow_zf_config.json" --model llama2-7b --topology pcie-4090 --gpus 8 \
  --seq-length 512 --out "$out/zenflow.json" 2>"$out/zenflow.err"
simulates "$out/zenflow.json"
grep -q '"offload_optimizer": "cpu"' "$out/zenflow.json" || fail "the optimizer offload was not imported"
grep -q "zenflow" "$out/zenflow.err" || fail "ZenFlow was not reported as not simulated"
"$simtrain" import deepspeed "$data/deepspeed/bing_bert_lamb_seq512.json" --model sc21-gpt-1.7b --seq-length 512 \
  --topology dgx-a100 --gpus 64 --out "$out/lamb.json" 2>/dev/null
simulates "$out/lamb.json"
"$simtrain" import deepspeed "$data/deepspeed/autotuning_ds_config_fp16_z3.json" --model llama2-7b \
  --topology dgx-a100 --gpus 8 --micro-batch 1 --out "$out/fp16z3.json" 2>/dev/null
simulates "$out/fp16z3.json"

# Hugging Face Trainer: saved TrainingArguments (with a DeepSpeed config they name), or the script's arguments.
"$simtrain" import hf "$data/hf/alpaca_fsdp.json" --model llama2-7b --topology dgx-a100 --gpus 4 \
  --out "$out/alpaca.json" 2>/dev/null
simulates "$out/alpaca.json"
"$simtrain" import hf "$data/hf/qlora_style.json" --model llama2-7b --topology dgx-a100 --gpus 8 --seq-length 512 \
  --out "$out/hf_zero2.json" 2>"$out/hf_zero2.err"
simulates "$out/hf_zero2.json"
grep -q '"zero_stage": 2' "$out/hf_zero2.json" || fail "the DeepSpeed config named by the arguments was not read"
"$simtrain" import hf --model llama2-7b --topology workstation-rtx3090 --gpus 4 --out "$out/hf_args.json" -- \
  --bf16 True --per_device_train_batch_size 1 --gradient_accumulation_steps 4 --fsdp "full_shard auto_wrap" \
  --optim adamw_bnb_8bit --gradient_checkpointing --max_seq_length 1024 2>/dev/null
simulates "$out/hf_args.json"
grep -q '"optimizer_algorithm": "adam_8bit"' "$out/hf_args.json" || fail "--optim adamw_bnb_8bit was not read"

# LLaMA-Factory: its LoRA and QLoRA examples on a workstation of four RTX 3090s.
for yaml in llama3_lora_sft llama3_lora_sft_otfq; do
  "$simtrain" import llamafactory "$data/llamafactory/$yaml.yaml" --model llama3-8b --topology workstation-rtx3090 \
    --gpus 4 --out "$out/$yaml.json" 2>/dev/null
  simulates "$out/$yaml.json"
done
grep -q '"base_quantization": "nf4"' "$out/llama3_lora_sft_otfq.json" || fail "quantization_bit 4 was not read"

# Accelerate: TRL's launcher configs (FSDP2; FSDP with CPU offload; DeepSpeed ZeRO-3) with a script's Trainer arguments;
# the GPU count is the config's num_processes.
for yaml in fsdp2 fsdp_qlora deepspeed_zero3; do
  "$simtrain" import accelerate "$data/accelerate/$yaml.yaml" --model llama3-8b --topology dgx-h100 --seq-length 2048 \
    --out "$out/accelerate_$yaml.json" -- --per_device_train_batch_size 1 --gradient_checkpointing 2>/dev/null
  simulates "$out/accelerate_$yaml.json"
done
grep -q '"offload_params": "cpu"' "$out/accelerate_fsdp_qlora.json" || fail "fsdp_offload_params was not read"
grep -q '"gpus": 8' "$out/accelerate_fsdp2.json" || fail "num_processes was not the GPU count"

# torchtitan: the Llama 3 and DeepSeek-V3 job files at their published scales.
for job in llama3_8b:8 llama3_70b:64 llama3_405b:128; do
  "$simtrain" import torchtitan "$data/torchtitan/${job%%:*}.toml" --topology dgx-h100 --gpus "${job##*:}" \
    --out "$out/${job%%:*}.json" 2>/dev/null
  simulates "$out/${job%%:*}.json"
done
# DeepSeek-V3 671B without expert parallelism does not fit: refused with the numbers, written only when allowed.
if "$simtrain" import torchtitan "$data/torchtitan/deepseek_v3_671b.toml" --topology dgx-h100 --gpus 256 \
  --out "$out/dsv3.json" 2>"$out/dsv3.err"; then
  fail "an out-of-memory import was written"
fi
grep -q "does not fit in GPU memory" "$out/dsv3.err" || fail "no memory verdict: $(cat "$out/dsv3.err")"
[ ! -e "$out/dsv3.json" ] || fail "a refused scenario was written"
"$simtrain" import torchtitan "$data/torchtitan/deepseek_v3_671b.toml" --topology dgx-h100 --gpus 256 --allow-oom \
  --out "$out/dsv3.json" 2>/dev/null
simulates "$out/dsv3.json" --allow-oom

# Standard output, --strict, and the JSON log format.
"$simtrain" import deepspeed "$data/deepspeed/zenflow_zf_config.json" --model llama2-7b --topology pcie-4090 --gpus 8 \
  --seq-length 512 2>/dev/null | grep -q '"schema": "scenario/v1"' || fail "nothing on standard output"
if "$simtrain" import deepspeed "$data/deepspeed/zenflow_zf_config.json" --model llama2-7b --topology pcie-4090 \
  --gpus 8 --seq-length 512 --strict >/dev/null 2>"$out/strict.err"; then
  fail "--strict accepted settings that did not carry over"
fi
grep -q "(--strict)" "$out/strict.err" || fail "--strict gave no reason"
"$simtrain" --log-format json import megatron --topology dgx-h100 --gpus 8 -- --num-layers 2 --hidden-size 64 \
  --num-attention-heads 4 --seq-length 128 --vocab-size 1000 --no-such-flag 2>"$out/log.json" >/dev/null
grep -q '"level":"warning","message":"--no-such-flag: not understood' "$out/log.json" || fail "$(cat "$out/log.json")"
echo "all imports round-trip"
