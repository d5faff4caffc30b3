#!/usr/bin/env python3
"""Make the tokenizer fixtures under tests/fixtures/tokenizer/.

Trains small byte-level BPE tokenizers with the Hugging Face `tokenizers`
library, using exactly BLOOM's pipeline (no normalizer; pre-tokenizer = Split on
BLOOM's regex, Isolated, then ByteLevel without prefix space and without its own
regex; BPE; ByteLevel decoder; <unk> <s> </s> <pad> as ids 0..3), on a generated
corpus of Chinese, English, mixed text, numbers, emoji, punctuation and
whitespace. Then records, for a list of test texts and a seeded set of random
ones, the ids `tokenizers` produces and the text it decodes them to.

Files written (each well under 300 KB):
  bpe500.json        vocabulary 500, merges in the legacy "a b" string form (as BLOOM's file)
  bpe3000.json       vocabulary 3000, merges as ["a", "b"] pairs (the form newer tokenizers writes)
  bpe500_added.json  bpe500 plus extra added tokens (overlapping, normalized or not, special or not)
  gpt2_style.json    ByteLevel with its own regex and prefix space (the GPT-2 layout), vocabulary 400
  tiny_merges.json   hand-made: bytes plus "bc", "ab", "abc" by the merges "b c", "a b", "ab c"
  tiny_ignore_merges.json  the same with model.ignore_merges = true
  expected.json      ids, decoded texts and pre-tokenized pieces of the named test texts
  expected_fuzz.json the same for seeded random texts (some of them random bytes)
  bench_corpus.json  the mixed corpus benchmarks/tokenizer_encode.cpp and tools/bench_tokenizer.py encode

With --large PATH it instead writes a synthetic tokenizer.json of BLOOM's size
(250680 tokens, ~250k merges; not committed) for measuring load time.

Usage: python3 tools/make_tokenizer_fixtures.py [--out DIR] [--large PATH]
"""

import argparse
import copy
import json
import os
import random
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

BLOOM_SPLIT_REGEX = " ?[^(\\s|[.,!?…。，、।۔،])]+"
SPECIALS = ["<unk>", "<s>", "</s>", "<pad>"]

# BLOOM's tokenizer.json as REFERENCE.md describes it: the parts a fixture must share.
BLOOM_EXPECTED = {
    "normalizer": None,
    "pre_tokenizer": {
        "type": "Sequence",
        "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": BLOOM_SPLIT_REGEX}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False},
        ],
    },
    "decoder": {"type": "ByteLevel"},
    "model": {
        "type": "BPE",
        "dropout": None,
        "unk_token": None,
        "continuing_subword_prefix": None,
        "end_of_word_suffix": None,
        "fuse_unk": False,
        "byte_fallback": False,
    },
    "added_tokens": [{"id": i, "content": c, "special": True, "lstrip": False, "rstrip": False,
                      "single_word": False, "normalized": False} for i, c in enumerate(SPECIALS)],
}


def bytes_to_unicode():
    """GPT-2's byte -> printable character table (what ByteLevel uses)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def check_bloom_structure(doc, name):
    """Fails unless `doc` has BLOOM's normalizer, pre-tokenizer, decoder, model and added tokens."""

    def sub(expected, actual, path):
        if isinstance(expected, dict):
            if not isinstance(actual, dict):
                raise SystemExit(f"{name}: {path} is {actual!r}; BLOOM's is an object {expected!r}")
            for k, v in expected.items():
                if k not in actual:
                    raise SystemExit(f"{name}: {path}.{k} is missing; BLOOM's is {v!r}")
                sub(v, actual[k], f"{path}.{k}")
        elif isinstance(expected, list):
            if not isinstance(actual, list) or len(actual) != len(expected):
                raise SystemExit(f"{name}: {path} is {actual!r}; BLOOM's has {len(expected)} entries")
            for i, (e, a) in enumerate(zip(expected, actual)):
                sub(e, a, f"{path}[{i}]")
        elif expected != actual:
            raise SystemExit(f"{name}: {path} is {actual!r}; BLOOM's is {expected!r}")

    for key, expected in BLOOM_EXPECTED.items():
        sub(expected, doc.get(key), key)
    vocab = doc["model"]["vocab"]
    alphabet = set(bytes_to_unicode().values())
    missing = [c for c in alphabet if c not in vocab]
    if missing:
        raise SystemExit(f"{name}: model.vocab lacks {len(missing)} byte-level characters")
    if not doc["model"]["merges"]:
        raise SystemExit(f"{name}: model.merges is empty")


# ---- corpus -----------------------------------------------------------------

EN_WORDS = """the of and to in is that for it as was with be by on not he this are or his from at which
but have an they you were her she there one all we their been has when who will more no if out so
said what up its about into than them can only other new some could time these two may then do first
any my now such like our over man me even most made after also did many before must through back years
where much your way well down should because each just those people how too little state good very make
world still own see men work long get here between both life being under never day same another know
while last might us great old year off come since against go came right used take three model token
training parallel tensor pipeline gradient optimizer learning rate batch sequence attention layer
extraction classification entity person location organization company government movie game book
internationalization unbelievably antidisestablishmentarianism pneumonoultramicroscopic""".split()

ZH_WORDS = """我们 你们 他们 中国 北京 上海 广州 深圳 杭州 南京 公司 政府 组织 人名 地名 机构 电影 游戏 书籍 职位
景点 地址 新闻 记者 报道 今天 明天 昨天 上午 下午 时间 工作 学习 研究 模型 训练 数据 文本 分类 抽取 输入 输出
标签 实体 识别 任务 语言 自然 处理 计算 机器 深度 网络 参数 大学 学生 老师 医院 医生 银行 经济 市场 发展 国家
世界 人民 社会 历史 文化 科技 创新 互联网 阿里巴巴 腾讯 华为 清华大学 北京大学 长城 故宫 西湖 黄山 长江 黄河
你好 谢谢 不是 可以 没有 一个 这个 那个 什么 为什么 怎么 因为 所以 但是 如果 已经 还是 非常 特别 重要""".split()

ZH_PUNCT = ["，", "。", "、", "！", "？", "：", "；", "“", "”", "（", "）", "《", "》", "…", "……", "——"]
EN_PUNCT = [",", ".", "!", "?", ";", ":", "-", "'", '"', "(", ")", "[", "]", "|", "/", "&", "%", "$", "#", "@"]
EMOJI = ["😀", "🚀", "👍🏽", "❤️", "🇨🇳", "🇺🇸", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🤖", "🎉", "☕", "👩🏻‍💻", "🧑‍🔬"]
OTHER_SCRIPTS = ["हिन्दी भाषा।", "یہ اردو ہے۔", "مرحبا، بالعالم", "Привет, мир", "こんにちは、世界。",
                 "안녕하세요", "Ελληνικά", "ภาษาไทย", "café naïve façade", "ﬁ ligature"]
SPACES = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u3000", "\u2003", " \t "]


def english_sentence(rng):
    words = [rng.choice(EN_WORDS) for _ in range(rng.randint(3, 14))]
    if rng.random() < 0.3:
        words[0] = words[0].capitalize()
    if rng.random() < 0.2:
        words.insert(rng.randrange(len(words)), str(rng.randint(0, 100000)))
    text = " ".join(words)
    if rng.random() < 0.4:
        i = rng.randrange(len(text))
        text = text[:i] + rng.choice(EN_PUNCT) + text[i:]
    return text + rng.choice([".", "!", "?", ",", ";", ""])


def chinese_sentence(rng):
    parts = []
    for _ in range(rng.randint(2, 10)):
        parts.append(rng.choice(ZH_WORDS))
        if rng.random() < 0.25:
            parts.append(rng.choice(ZH_PUNCT))
    if rng.random() < 0.2:
        parts.insert(rng.randrange(len(parts) + 1), str(rng.randint(1900, 2030)) + "年")
    return "".join(parts) + rng.choice(["。", "！", "？", "…", "，", ""])


def mixed_sentence(rng):
    kind = rng.random()
    if kind < 0.3:
        return chinese_sentence(rng) + rng.choice(["", " "]) + english_sentence(rng)
    if kind < 0.5:
        labels = "，".join(rng.sample(["人名", "地名", "机构", "公司", "职位", "电影", "游戏"], rng.randint(1, 4)))
        task = rng.choice(["分类", "抽取"])
        return f"输入: {chinese_sentence(rng)}\n{task}: {labels}\n输出: [GEN]"
    if kind < 0.65:
        return rng.choice(EMOJI) + " " + english_sentence(rng) + rng.choice(EMOJI) * rng.randint(1, 3)
    if kind < 0.75:
        return rng.choice(OTHER_SCRIPTS) + rng.choice(SPACES) + chinese_sentence(rng)
    if kind < 0.85:
        n = rng.randint(0, 10 ** rng.randint(1, 9))
        return f"{n} + {rng.random():.4f} = {n * 3.5:.2f}" + rng.choice(SPACES) + f"{rng.randint(1, 12)}/{rng.randint(1, 28)}"
    if kind < 0.95:
        return "def f(x):\n    return x ** 2  # " + english_sentence(rng) + "\n\tpass"
    return rng.choice(SPACES).join(english_sentence(rng).split(" "))


def corpus(seed, count):
    rng = random.Random(seed)
    makers = [english_sentence, chinese_sentence, mixed_sentence]
    return [rng.choice(makers)(rng) for _ in range(count)]


# ---- tokenizers ---------------------------------------------------------------

def bloom_like(vocab_size, texts):
    tok = Tokenizer(models.BPE())
    tok.normalizer = None
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(BLOOM_SPLIT_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    return tok


def gpt2_style(vocab_size, texts):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    return tok


def tiny(base_doc, ignore_merges):
    """A hand-made model where "abc" is a token that the merges never reach
    from "a b c" (b+c merges first), to tell ignore_merges apart."""
    b2u = bytes_to_unicode()
    doc = copy.deepcopy(base_doc)
    vocab = {s: i for i, s in enumerate(SPECIALS)}
    for b in range(256):
        vocab[b2u[b]] = len(vocab)
    for t in ("bc", "ab", "abc"):
        vocab[t] = len(vocab)
    doc["model"]["vocab"] = vocab
    doc["model"]["merges"] = ["b c", "a b", "ab c"]
    doc["model"]["ignore_merges"] = ignore_merges
    return doc


def with_legacy_merges(doc):
    """The same tokenizer with merges written as "a b" strings (BLOOM's file has this form)."""
    doc = copy.deepcopy(doc)
    merges = doc["model"]["merges"]
    doc["model"]["merges"] = [m if isinstance(m, str) else f"{m[0]} {m[1]}" for m in merges]
    return doc


# ---- test texts ---------------------------------------------------------------

def test_texts():
    """(name, raw bytes) pairs."""
    t = [
        ("empty", ""),
        ("english", "The quick brown fox jumps over the lazy dog."),
        ("english_punct", "Hello, world! Isn't it great? (Yes|no) [maybe] {ok}..."),
        ("chinese", "自然语言处理是人工智能的一个重要方向。"),
        ("chinese_punct", "我们今天去北京，明天去上海、广州！你呢？……好的。"),
        ("mixed", "SeqGPT是一个开放域的NLU模型, supports 分类 and 抽取 tasks."),
        ("seqgpt_prompt", "输入: 张三在阿里巴巴工作。\n抽取: 人名，公司\n输出: [GEN]"),
        ("numbers", "3.14159 2718 1e-5 0x1F 1,000,000 ２０２４年"),
        ("emoji", "I love 🍕 and ☕! 😀😀😀"),
        ("emoji_zwj", "family 👨‍👩‍👧‍👦 rainbow 🏳️‍🌈 coder 👩🏻‍💻 flags 🇨🇳🇺🇸"),
        ("whitespace_runs", "a  b   c    d\t\te\n\nf \n g\r\nh"),
        ("only_spaces", "     "),
        ("only_newlines", "\n\n\n"),
        ("leading_trailing_space", "  padded text  "),
        ("unicode_spaces", "a\u00a0b\u3000c\u2003d\u200be\u0085f\ufeffg"),
        ("regex_class_chars", "(a)|b|(c)[d]\\e…f。g，h、i।j۔k،l"),
        ("ellipsis", "wait… what…… really…"),
        ("long_word", "pneumonoultramicroscopicsilicovolcanoconiosis" * 3),
        ("very_long_word", "abcdefghij" * 120),
        ("repeated_char", "a" * 300),
        ("long_chinese_run", "中华人民共和国国务院总理" * 20),
        ("specials_inline", "<s>hello</s><pad><unk> world<s>"),
        ("specials_glued", "x<s>y</s>z<pad><pad>"),
        ("special_like", "< s> <s >< /s> </s </s>> <<s>>"),
        ("other_scripts", "हिन्दी भाषा। یہ اردو ہے۔ مرحبا، بالعالم Привет"),
        ("combining", "e\u0301 n\u0303 a\u0308 \u1100\u1161\u11a8"),
        ("control_chars", "a\x00b\x01c\x7fd\x1be"),
        ("code", "def f(x):\n    return x ** 2  # square\n\tpass"),
        ("url_email", "see https://example.com/a?b=c&d=e or mail a.b@c.org"),
        ("byte_level_chars", "ĠĊĉ Ã© Ð¿"),
        ("supplementary", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𠀀𠀁 𝟘𝟙𝟚"),
        ("added_overlap", "abcd ab abc 你好世界你好 [SEP]<s>! hello world x<mask>y"),
        ("abc_words", "abc abcabc ab bc cab"),
    ]
    out = [(name, s.encode("utf-8")) for name, s in t]
    out += [
        ("invalid_lone_continuation", b"ab\x80cd"),
        ("invalid_truncated_3byte", b"x\xe4\xbd"),
        ("invalid_truncated_then_ascii", b"\xe4\xbdA\xe4"),
        ("invalid_overlong", b"\xc0\xaf\xe0\x80\xaf"),
        ("invalid_surrogate", b"\xed\xa0\x80z"),
        ("invalid_above_max", b"\xf4\x90\x80\x80 \xf5\xff"),
        ("invalid_mixed", "你好".encode() + b"\xff\xfe" + "世界".encode() + b"\xf0\x9f\x98"),
        ("invalid_in_special", b"<s\xff>\xff<s>"),
    ]
    return out


def fuzz_texts(seed, count):
    rng = random.Random(seed)
    pool = (list("abcxyzABC019 .,!?()|[]\\'\"-_\t\n") + list("你好世界中国，。、…！？") +
            ["😀", "👍🏽", "👨‍👩‍👧", "\u00a0", "\u3000", "।", "۔", "،", "<s>", "</s>", "<pad>", "<unk>", "é", "ß"])
    out = []
    for i in range(count):
        if i % 10 == 9:
            raw = bytes(rng.randrange(256) for _ in range(rng.randint(1, 24)))
        else:
            raw = "".join(rng.choice(pool) for _ in range(rng.randint(1, 40))).encode()
        out.append((f"fuzz_{i}", raw))
    return out


# ---- synthetic large tokenizer --------------------------------------------------

def write_large(path, base_doc, tokens=250680, seed=7):
    """A tokenizer.json with BLOOM's layout and size: each new token is the merge
    of two earlier ones, so the file is a consistent BPE model."""
    rng = random.Random(seed)
    b2u = bytes_to_unicode()
    vocab = {s: i for i, s in enumerate(SPECIALS)}
    pieces = []
    for b in range(256):
        vocab[b2u[b]] = len(vocab)
        pieces.append(b2u[b])
    merges = []
    while len(vocab) < tokens:
        def pick():
            if rng.random() < 0.7:
                return pieces[min(int(rng.expovariate(1 / 3000)), len(pieces) - 1)]
            return rng.choice(pieces)
        a, b = pick(), pick()
        t = a + b
        if t in vocab or len(t) > 16:
            continue
        vocab[t] = len(vocab)
        pieces.append(t)
        merges.append(f"{a} {b}")
    doc = copy.deepcopy(base_doc)
    doc["model"]["vocab"] = vocab
    doc["model"]["merges"] = merges
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False)
    print(f"wrote {path}: {os.path.getsize(path) / 1e6:.1f} MB, {len(vocab)} tokens, {len(merges)} merges")


def record_case(name, raw, toks):
    """What `tokenizers` does with one text (given as bytes) for every tokenizer."""
    text = raw.decode("utf-8", "replace")
    case = {"name": name, "hex": raw.hex(), "text": text, "valid_utf8": True, "ids": {}, "decoded": {},
            "decoded_skip_special": {}}
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        case["valid_utf8"] = False
    for tname, tok in toks.items():
        ids = tok.encode(text, add_special_tokens=False).ids
        case["ids"][tname] = ids
        case["decoded"][tname] = tok.decode(ids, skip_special_tokens=False)
        case["decoded_skip_special"][tname] = tok.decode(ids, skip_special_tokens=True)
    if not name.startswith("fuzz_"):
        case["pieces"] = {t: [p for p, _ in toks[t].pre_tokenizer.pre_tokenize_str(text)]
                          for t in ("bpe3000", "gpt2_style")}
    return case


# ---- main ---------------------------------------------------------------------

def main():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(repo, "tests", "fixtures", "tokenizer"))
    ap.add_argument("--large", metavar="PATH", help="write a synthetic 250k-token tokenizer.json to PATH and stop")
    args = ap.parse_args()

    train = corpus(seed=1, count=6000)
    if args.large:
        base = json.loads(bloom_like(500, train[:500]).to_str())
        write_large(args.large, base)
        return

    os.makedirs(args.out, exist_ok=True)
    docs = {}
    docs["bpe500"] = with_legacy_merges(json.loads(bloom_like(500, train).to_str()))
    docs["bpe3000"] = json.loads(bloom_like(3000, train).to_str())

    added = Tokenizer.from_str(json.dumps(docs["bpe500"]))
    added.add_tokens([AddedToken("ab", normalized=True), AddedToken("abc", normalized=True),
                      AddedToken("你好世界", normalized=False), AddedToken(" world", normalized=True),
                      AddedToken("<s>!", normalized=True), AddedToken("<mask>", normalized=False)])
    added.add_special_tokens([AddedToken("[SEP]", special=True, normalized=False)])
    docs["bpe500_added"] = with_legacy_merges(json.loads(added.to_str()))
    docs["gpt2_style"] = json.loads(gpt2_style(400, train).to_str())
    docs["tiny_merges"] = tiny(docs["bpe500"], ignore_merges=False)
    docs["tiny_ignore_merges"] = tiny(docs["bpe500"], ignore_merges=True)

    for name in ("bpe500", "bpe3000"):
        check_bloom_structure(docs[name], name)

    toks = {}
    for name, doc in docs.items():
        text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
        path = os.path.join(args.out, f"{name}.json")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        toks[name] = Tokenizer.from_file(path)
        size = os.path.getsize(path)
        assert size < 300_000, f"{path} is {size} bytes"

    # The legacy merge form must load to the same model as the pair form.
    pair_form = Tokenizer.from_str(bloom_like(500, train).to_str())
    for text in corpus(seed=3, count=200):
        assert pair_form.encode(text).ids == toks["bpe500"].encode(text).ids, text

    cases = [record_case(name, raw, toks) for name, raw in test_texts()]
    main_toks = {k: v for k, v in toks.items() if not k.startswith("tiny_")}
    fuzz_cases = [record_case(name, raw, main_toks) for name, raw in fuzz_texts(seed=5, count=200)]

    # Ids that name no token are skipped by decode; record that too.
    extra_decodes = []
    for tname, tok in toks.items():
        n = tok.get_vocab_size(with_added_tokens=True)
        for ids in ([n, 0, n + 5], [1, n + 100, 2]):
            extra_decodes.append({"tokenizer": tname, "ids": ids,
                                  "decoded": tok.decode(ids, skip_special_tokens=False),
                                  "decoded_skip_special": tok.decode(ids, skip_special_tokens=True)})

    expected = {
        "generator": "tools/make_tokenizer_fixtures.py",
        "tokenizers_version": __import__("tokenizers").__version__,
        "tokenizers": {name: {"file": f"{name}.json",
                              "vocab_size": tok.get_vocab_size(with_added_tokens=True),
                              "special_ids": {s: tok.token_to_id(s) for s in SPECIALS}}
                       for name, tok in toks.items()},
        "cases": cases,
        "extra_decodes": extra_decodes,
    }
    fuzz = {"generator": expected["generator"], "tokenizers_version": expected["tokenizers_version"],
            "cases": fuzz_cases}
    for fname, doc in (("expected.json", expected), ("expected_fuzz.json", fuzz)):
        path = os.path.join(args.out, fname)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False, separators=(",", ":"))
            f.write("\n")
        assert os.path.getsize(path) < 300_000, f"{path} is {os.path.getsize(path)} bytes"

    bench = corpus(seed=11, count=1500)
    path = os.path.join(args.out, "bench_corpus.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(bench, f, ensure_ascii=False, indent=0)
        f.write("\n")

    for fname in sorted(os.listdir(args.out)):
        print(f"{fname}: {os.path.getsize(os.path.join(args.out, fname))} bytes")
    print(f"{len(cases)} + {len(fuzz_cases)} cases, tokenizers {__import__('tokenizers').__version__}")


if __name__ == "__main__":
    sys.exit(main())
