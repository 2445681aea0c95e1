"""Makes tests/data/tokenizer/cases.tsv: (text, expected tokens, ids, offsets) from
reference implementations run offline.

  tokens, ids   Google's tokenization.py FullTokenizer (tools/bert_reference_tokenizer.py)
                with max_input_chars_per_word set per case (bert.c default 100, Google 200).
                Cases with never_split use HuggingFace transformers' Python BertTokenizer
                (BertTokenizerLegacy in transformers 5), which splits the text around its
                special tokens first (Google's has no such option).
  invalid_utf8  how many U+FFFD Python's bytes.decode("utf-8", "replace") makes
  offsets       HuggingFace `tokenizers` (Rust) BertWordPieceTokenizer character offsets,
                turned into byte offsets of the original bytes; only where its tokens equal
                the reference's (it lacks final sigma, for one), else "-".

Every case is run for both casings: uncased with bert-base-uncased's vocabulary, cased
with bert-base-cased's. Inputs are arbitrary bytes (invalid UTF-8 included), stored hex.

Run with the project venv (it has tokenizers and transformers):
  .venv/bin/python tools/make_tokenizer_fixtures.py
"""
import codecs
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bert_reference_tokenizer  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCABS = {
    "uncased": os.path.join(ROOT, "data/vocab/bert-base-uncased-vocab.txt"),
    "cased": os.path.join(ROOT, "data/vocab/bert-base-cased-vocab.txt"),
}
SPECIALS = ["[UNK]", "[SEP]", "[PAD]", "[CLS]", "[MASK]"]

# (group, text as str or bytes, max_input_chars_per_word, never_split?)
CASES = [
    ("english", "Hello, world! This is BERT.", 100, False),
    ("english", "The quick brown fox jumps over the lazy dog.", 100, False),
    ("english", "unaffable johanson playing tokenization", 100, False),
    ("english", "I can't believe it's 3.14! Isn't it?", 100, False),
    ("english", "1,234,567.89 on 2023-01-01: 50% off $3.50 (approx.)", 100, False),
    ("english", "https://example.com/path?q=1&r=2 user@example.org #hashtag @mention", 100, False),
    ("english", "  leading and trailing spaces  ", 100, False),
    ("accents", "Café naïve résumé São Paulo Ångström Crème brûlée", 100, False),
    ("accents", "cafe\u0301 e\u0301e\u0300e\u0302 n\u0303 a\u0308\u0304", 100, False),
    ("accents", "Tiếng Việt có dấu; Dvořák; Łódź; Þórr", 100, False),
    ("accents", "\u0301\u0302 only marks, x\u20dd enclosing, \u0915\u094d\u0937 devanagari", 100, False),
    ("cjk", "中文分词测试，今天天气很好。", 100, False),
    ("cjk", "日本語のテキスト、カタカナとひらがな", 100, False),
    ("cjk", "한국어 텍스트 처리 한글", 100, False),
    ("cjk", "豈更車 compat ideographs 𠀀𪜀 ext-B", 100, False),
    ("emoji", "I \u2764\ufe0f \U0001F355 and \U0001F468\u200d\U0001F469\u200d\U0001F467 families \U0001F600!", 100, False),
    ("symbols", "€100 £50 ¥20 ©®™ ±×÷ ∑∫√∞ x² + y³ = z⁴ ½ °C", 100, False),
    ("symbols", "←→↑↓ ♠♣♥♦ ★☆ ✓✗ \U0001F130\U0001F170", 100, False),
    ("punct", "«quoted» „Anführung“ — dash – ‘single’ “double” … ¿Qué? ¡Hola!", 100, False),
    ("punct", "。、「」『』【】・〜 ‐‑‒ ⁂ ‽ ⸘ ※ § ¶ † ‡", 100, False),
    ("punct", "^caret$ `back` ~tilde| {braces} [brackets] <angle> \\slash/ _under_", 100, False),
    ("control", "a\u200bb zero\u200cwidth\u200d joiner \ufeffBOM soft\u00adhyphen", 100, False),
    ("control", "tab\there\r\nCRLF\rCR", 100, False),
    ("control", "\x00nul\x07bell\x1b[0m esc \x7fdel", 100, False),
    ("control", "line\u2028sep para\u2029sep nb\u00a0sp ideo\u3000sp thin\u2009sp", 100, False),
    ("control", "\x0bvt\x0cff\x85nel\x1cfs\x1dgs\x1ers\x1fus", 100, False),
    ("control", "private\ue000use \U000F0000 unassigned\u0378x \ufffdrepl", 100, False),
    ("turkish", "İstanbul İZMİR ıişğüçö DİYARBAKIR Iİıi", 100, False),
    ("german", "Straße STRASSE ẞ groß Grüße Maße", 100, False),
    ("greek", "ΟΔΥΣΣΕΥΣ ΣΟΦΟΣ. Σ ΑΣ ΑΣ. ΑΣ'Β ΑΣ,Β ΑΣ.Β σοφός Ἀθῆναι", 100, False),
    ("mixed", "Москва is Москва; القاهرة; עברית; हिन्दी; ไทย; Ελληνικά; ქართული", 100, False),
    ("mixed", "Ǆemal ǅ ǆ ﬁnance ﬀ Ⅻ ⅻ ① ｆｕｌｌｗｉｄｔｈ ＡＢＣ！ ㍿", 100, False),
    ("mixed", "mixedСкрипт123中文abc", 100, False),
    ("long", "a" * 99 + " " + "b" * 100 + " " + "c" * 101, 100, False),
    ("long", "a" * 99 + " " + "b" * 100 + " " + "c" * 101 + " " + "d" * 201, 200, False),
    ("long", "supercalifragilisticexpialidocious" * 4 + ".ok", 100, False),
    ("long", "é" * 100 + " " + "é" * 101 + " " + "ü" * 60 + "x", 100, False),
    ("long", "antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis", 100, False),
    ("long", "x" * 150 + "." + "y" * 5, 100, False),
    ("empty", "", 100, False),
    ("empty", "   ", 100, False),
    ("empty", "\t\t \u3000", 100, False),
    ("empty", "\u200b\u200d\x00", 100, False),
    ("invalid", b"\xff", 100, False),
    ("invalid", b"abc\xfedef", 100, False),
    ("invalid", b"caf\xc3", 100, False),
    ("invalid", b"\xe2\x82", 100, False),
    ("invalid", b"\xed\xa0\x80surrogate", 100, False),
    ("invalid", b"\xc0\xafoverlong \xe0\x80\xaf", 100, False),
    ("invalid", b"\xf4\x90\x80\x80beyond \xf8\x88\x80\x80\x80", 100, False),
    ("invalid", b"ok \xf0\x9f\x98 mid \xf0\x9f\x98\x80 whole", 100, False),
    ("invalid", b"\x80\x80\x80 conts \xc3\xa9t\xc3", 100, False),
    ("never_split", "the [MASK] sat on [SEP] x[MASK]. [CLS][MASK] [mask] [UNK]", 100, True),
    ("never_split", "[MASK]", 100, True),
    ("never_split", "Ελληνικά [MASK]ΣΟΦΟΣ [PAD]", 100, True),
]


def decode_with_spans(data):
    """Decodes like bytes.decode('utf-8', 'replace'); returns (text, byte span per char)."""
    bad = []

    def record(exc):
        bad.append((exc.start, exc.end))
        return ("\ufffd", exc.end)

    codecs.register_error("bert_fixture_record", record)
    text = data.decode("utf-8", "bert_fixture_record")
    spans, pos, b = [], 0, 0
    for ch in text:
        if b < len(bad) and bad[b][0] == pos:
            spans.append(bad[b])
            pos = bad[b][1]
            b += 1
        else:
            n = len(ch.encode("utf-8"))
            spans.append((pos, pos + n))
            pos += n
    assert pos == len(data)
    return text, spans, len(bad)


def hf_offsets(hf, text, spans, tokens):
    enc = hf.encode(text, add_special_tokens=False)
    if enc.tokens != tokens:
        return None
    out = []
    for a, b in enc.offsets:
        out.append((spans[a][0], spans[b - 1][1]) if b > a else (0, 0))
    return out


def main():
    from tokenizers import BertWordPieceTokenizer
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

    rows = []
    for casing, vocab_file in VOCABS.items():
        lower = casing == "uncased"
        hf = BertWordPieceTokenizer(vocab_file, lowercase=lower, strip_accents=lower, clean_text=True,
                                    handle_chinese_chars=True)
        hf_special = BertTokenizerLegacy(vocab_file, do_lower_case=lower)
        for group, raw, max_chars, never_split in CASES:
            data = raw.encode("utf-8") if isinstance(raw, str) else raw
            text, spans, invalid = decode_with_spans(data)
            if never_split:
                hf_special.wordpiece_tokenizer.max_input_chars_per_word = max_chars
                tokens = hf_special.tokenize(text)
                ids = hf_special.convert_tokens_to_ids(tokens)
                offsets = None
            else:
                ref = bert_reference_tokenizer.full_tokenizer(vocab_file, lower, max_chars)
                tokens = ref.tokenize(text)
                ids = ref.convert_tokens_to_ids(tokens)
                offsets = hf_offsets(hf, text, spans, tokens) if max_chars == 100 else None
            rows.append("\t".join([
                casing, group, str(max_chars), ",".join(SPECIALS) if never_split else "-", data.hex(),
                " ".join(tokens), " ".join(map(str, ids)),
                " ".join(f"{a}:{b}" for a, b in offsets) if offsets is not None else "-",
                str(invalid),
            ]))
    out = os.path.join(ROOT, "tests/data/tokenizer/cases.tsv")
    with open(out, "w", encoding="utf-8") as f:
        f.write("# casing\tgroup\tmax_chars\tnever_split\tinput_hex\ttokens\tids\tbyte_offsets\tinvalid_utf8"
                "  (made by tools/make_tokenizer_fixtures.py)\n")
        f.write("\n".join(rows) + "\n")
    with_offsets = sum(1 for r in rows if r.split("\t")[7] != "-")
    print(f"{out}: {len(rows)} cases, {with_offsets} with HF offsets")


if __name__ == "__main__":
    main()
