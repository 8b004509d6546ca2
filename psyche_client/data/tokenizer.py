"""Tokenizers trained offline: byte-level (256 ids, nothing to train) or a byte-level BPE trained
on the corpus with the `tokenizers` library. Either is saved as a `tokenizer.json` that
`load_tokenizer` reads back."""

import json
from pathlib import Path

BYTE_LEVEL = {"type": "psyche-bytes", "vocab_size": 256}


class ByteTokenizer:
    vocab_size = 256

    def encode(self, text: str) -> list:
        return list(text.encode("utf-8"))

    def decode(self, ids) -> str:
        return bytes(int(i) for i in ids).decode("utf-8", errors="replace")

    def save(self, path) -> None:
        Path(path).write_text(json.dumps(BYTE_LEVEL))


class BpeTokenizer:
    def __init__(self, tok):
        self.tok = tok
        self.vocab_size = tok.get_vocab_size()

    @classmethod
    def train(cls, text: str, vocab_size: int):
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        lines = text.splitlines(keepends=True)
        tok.train_from_iterator(lines, trainer=trainer, length=len(lines))
        return cls(tok)

    def encode(self, text: str) -> list:
        return self.tok.encode(text).ids

    def decode(self, ids) -> str:
        return self.tok.decode([int(i) for i in ids])

    def save(self, path) -> None:
        self.tok.save(str(path))


def load_tokenizer(path):
    data = json.loads(Path(path).read_text())
    if data.get("type") == BYTE_LEVEL["type"]:
        return ByteTokenizer()
    from tokenizers import Tokenizer
    return BpeTokenizer(Tokenizer.from_file(str(path)))
