#!/usr/bin/env python3
"""Writes a random-weight DeepSeek-R1-Distill-Qwen-7B-shaped checkpoint with transformers'
save_pretrained (bf16 safetensors shards), as users download them. usage: make_7b_checkpoint.py
CATALOG_JSON OUT_DIR"""
import json
import sys

import torch
from transformers import AutoConfig, AutoModelForCausalLM

cfg_dict = json.load(open(sys.argv[1]))["config"]
cfg = AutoConfig.for_model(cfg_dict.pop("model_type"), **cfg_dict)
torch.manual_seed(0)
with torch.device("cuda"):
    model = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16)
model.save_pretrained(sys.argv[2], safe_serialization=True)
print("saved", sys.argv[2])
