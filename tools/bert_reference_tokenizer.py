"""Loads Google's reference tokenizer (google-research/bert tokenization.py) offline.

tokenization.py imports tensorflow at module level but its tokenizer classes need only
`six` and `unicodedata`; a stub `tensorflow` module (tf.gfile.GFile -> open) stands in.
The file is read from a checkout or a bare git mirror of github.com/google-research/bert
(BERT_REPO, default /work/.mirror/google-research+bert/repo); nothing of it is committed.

Used by tools/make_tokenizer_fixtures.py, tools/tokenizer_parity.py and bench/.
"""
import os
import subprocess
import sys
import types

DEFAULT_REPO = "/work/.mirror/google-research+bert/repo"


def _source(repo):
    path = os.path.join(repo, "tokenization.py")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return f.read()
    return subprocess.check_output(["git", "--git-dir", repo, "show", "HEAD:tokenization.py"], text=True)


def load(repo=None):
    repo = repo or os.environ.get("BERT_REPO", DEFAULT_REPO)
    if "tensorflow" not in sys.modules:
        tf = types.ModuleType("tensorflow")
        tf.gfile = types.SimpleNamespace(GFile=lambda path, mode="r": open(path, mode, encoding="utf-8"))
        sys.modules["tensorflow"] = tf
    module = types.ModuleType("bert_tokenization")
    exec(compile(_source(repo), "tokenization.py", "exec"), module.__dict__)
    return module


def full_tokenizer(vocab_file, do_lower_case, max_input_chars_per_word=100, repo=None):
    """FullTokenizer with the word-length limit set (reference default 200; bert.c's 100)."""
    tok = load(repo).FullTokenizer(vocab_file=vocab_file, do_lower_case=do_lower_case)
    tok.wordpiece_tokenizer.max_input_chars_per_word = max_input_chars_per_word
    return tok
