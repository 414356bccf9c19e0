"""Builds the local Hub's repositories: a tiny Llama (two revisions) and two LoRA adapters for it.

Run by deploy/local/install.sh with the vLLM runtime's Python (torch, transformers, tokenizers, peft):

    python build-models.py <mirrors-dir>

Each repository is a git repository at <mirrors-dir>/models/<org>/<name>, the layout olah serves offline as a Hub
mirror. Everything is deterministic (fixed seeds, a generated corpus, fixed commit dates), so the commit ids are the
same on every machine and tests may pin them. A repository that already holds its last commit is left as it is.

The model is real, not a stand-in: a byte-level BPE tokenizer (vocabulary 1000, ChatML chat template) and a Llama
with hidden size 64, 2 layers and head_dim 32 (the smallest vLLM's CPU attention accepts), random weights in
float32. vLLM serves it for real; its answers are gibberish, since nothing was trained.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

ORG = 'ferry-local'
MODEL = 'tiny-llama'
ADAPTERS = ('tiny-lora-sql', 'tiny-lora-chat')
# Fixed commit identity and dates: the same bytes and the same commit ids on every machine.
GIT_ENV = {
    'GIT_AUTHOR_NAME': 'Ferry local stack',
    'GIT_AUTHOR_EMAIL': 'local@ferry.invalid',
    'GIT_COMMITTER_NAME': 'Ferry local stack',
    'GIT_COMMITTER_EMAIL': 'local@ferry.invalid',
    'GIT_CONFIG_GLOBAL': os.devnull,
    'GIT_CONFIG_NOSYSTEM': '1',
}
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
WORDS = (
    'the model serves weights from a volume and answers requests with tokens while the workflow keeps its history '
    'durable steps pull release roll out wait health ready update delete cluster node pod job claim engine adapter '
    'a quick brown fox jumps over lazy dogs near river banks under bright morning skies select from where group by '
    'order limit join table column value hello world how are you today thank you very much please and or not'
).split()


def git(repo, *args, date):
    env = {**os.environ, **GIT_ENV, 'GIT_AUTHOR_DATE': date, 'GIT_COMMITTER_DATE': date}
    return subprocess.run(['git', '-C', repo, *args], check=True, env=env, capture_output=True, text=True).stdout.strip()


def corpus():
    import random

    rng = random.Random(7)
    lines = []
    for _ in range(4000):
        lines.append(' '.join(rng.choice(WORDS) for _ in range(rng.randint(4, 16))))
    return lines


def build_tokenizer(out):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ['<|endoftext|>', '<|im_start|>', '<|im_end|>']
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1000, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token='<|im_end|>', pad_token='<|endoftext|>', bos_token=None, unk_token=None
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    return fast


def build_model(out, seed, tokenizer):
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=512,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        torch_dtype='float32',
        bos_token_id=None,
        eos_token_id=tokenizer.convert_tokens_to_ids('<|im_end|>'),
        pad_token_id=tokenizer.convert_tokens_to_ids('<|endoftext|>'),
    )
    model = LlamaForCausalLM(config).to(torch.float32)
    model.save_pretrained(out, safe_serialization=True)
    GenerationConfig(eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id).save_pretrained(out)


def build_adapter(out, base_dir, seed, targets):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    base = LlamaForCausalLM.from_pretrained(base_dir, torch_dtype=torch.float32)
    # init_lora_weights=False: both matrices random, so the adapter really changes the answers.
    lora = get_peft_model(base, LoraConfig(r=8, lora_alpha=16, target_modules=list(targets), init_lora_weights=False))
    lora.save_pretrained(out, safe_serialization=True)
    # The base is named by its Hub id, not by the temporary directory it was built from.
    config_file = os.path.join(out, 'adapter_config.json')
    with open(config_file) as f:
        config = json.load(f)
    config['base_model_name_or_path'] = f'{ORG}/{MODEL}'
    # peft keeps target_modules as a set: its order would follow the hash seed.
    if isinstance(config.get('target_modules'), list):
        config['target_modules'] = sorted(config['target_modules'])
    with open(config_file, 'w') as f:
        json.dump(config, f, indent=2, sort_keys=True)


def readme(title, body):
    return f'---\nlicense: apache-2.0\n---\n# {title}\n\n{body}\n'


def commit_tree(repo, files_dir, message, date, tag=None):
    """Replaces the repository's tree with files_dir's files, commits, and tags the commit."""
    for name in os.listdir(repo):
        if name != '.git':
            path = os.path.join(repo, name)
            shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
    for name in sorted(os.listdir(files_dir)):
        shutil.copy2(os.path.join(files_dir, name), os.path.join(repo, name))
    git(repo, 'add', '-A', date=date)
    git(repo, 'commit', '-q', '-m', message, date=date)
    if tag:
        git(repo, 'tag', tag, date=date)


def new_repo(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    subprocess.run(['git', 'init', '-q', '-b', 'main', path], check=True, env={**os.environ, **GIT_ENV})


def main():
    mirrors = sys.argv[1]
    stamp = os.path.join(mirrors, '.ferry-built')
    if os.path.isfile(stamp):
        print(json.dumps({'event': 'unchanged', 'mirrors': mirrors}))
        return
    root = os.path.join(mirrors, 'models', ORG)
    with tempfile.TemporaryDirectory() as tmp:
        model_repo = os.path.join(root, MODEL)
        new_repo(model_repo)
        v1 = os.path.join(tmp, 'v1')
        tokenizer = build_tokenizer(v1)
        build_model(v1, seed=1, tokenizer=tokenizer)
        with open(os.path.join(v1, 'README.md'), 'w') as f:
            f.write(readme(MODEL, 'A tiny Llama with random weights for Ferry\'s local stack. Revision v1.'))
        commit_tree(model_repo, v1, 'v1: random weights, seed 1', '2026-01-01T00:00:00Z', tag='v1')

        v2 = os.path.join(tmp, 'v2')
        shutil.copytree(v1, v2)
        build_model(v2, seed=2, tokenizer=tokenizer)
        with open(os.path.join(v2, 'README.md'), 'w') as f:
            f.write(readme(MODEL, 'A tiny Llama with random weights for Ferry\'s local stack. Revision v2.'))
        commit_tree(model_repo, v2, 'v2: random weights, seed 2', '2026-01-02T00:00:00Z', tag='v2')

        for i, (name, targets) in enumerate(zip(ADAPTERS, (('q_proj', 'v_proj'), ('q_proj', 'k_proj', 'v_proj', 'o_proj')))):
            repo = os.path.join(root, name)
            new_repo(repo)
            out = os.path.join(tmp, name)
            build_adapter(out, v1, seed=10 + i, targets=targets)
            with open(os.path.join(out, 'README.md'), 'w') as f:
                f.write(readme(name, f'A LoRA adapter with random weights for {ORG}/{MODEL}.'))
            commit_tree(repo, out, 'random LoRA weights', '2026-01-03T00:00:00Z', tag='v1')

    summary = {}
    for name in (MODEL, *ADAPTERS):
        repo = os.path.join(root, name)
        summary[f'{ORG}/{name}'] = {
            'refs': {ref: git(repo, 'rev-parse', ref, date='2026-01-01T00:00:00Z') for ref in ('main', 'v1')},
            'bytes': sum(os.path.getsize(os.path.join(repo, f)) for f in os.listdir(repo) if f != '.git'),
        }
    with open(stamp, 'w') as f:
        json.dump(summary, f, indent=2, sort_keys=True)
    print(json.dumps({'event': 'built', 'repos': summary}))


if __name__ == '__main__':
    main()
