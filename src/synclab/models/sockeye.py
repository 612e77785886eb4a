"""A Sockeye-like LSTM encoder-decoder with MLP attention (Hieber et al. 2017), as P3 trains it.

P3 (§5, Figs. 5(d), 7(d), 8-10) trains Sockeye 1.5 on IWSLT15 English-Vietnamese
but prints no parameter count. The configuration here is the one in P3's
artifact script (``example/sockeye/scripts/sockeye_1.5-iwslt15_en-vi.sh``):

* ``--num-layers 2:2 --rnn-cell-type lstm --rnn-num-hidden 512 --num-embed 512:512``
* ``--attention-type mlp --attention-num-hidden 512 --rnn-encoder-reverse-input``
* vocabularies built from the artifact's ``vocab.en`` (17,188 words) and
  ``vocab.vi`` (7,706 words) plus Sockeye's 4 symbols (<pad>, <unk>, <s>, </s>):
  17,192 source and 7,710 target types. No weight tying (Sockeye 1.5's default).
* ``--weight-init uniform --weight-init-scale 0.1``: every tensor starts U(-0.1, 0.1).

Sockeye 1.5's RNN model, which this mirrors tensor by tensor:

* encoder: source embedding; the source reversed; one bidirectional LSTM layer
  (256 units per direction); ``layers - 1`` unidirectional LSTM layers (512);
* decoder: each LSTM layer's initial h and c = tanh(FC(last encoder state));
  input feeding (the LSTM input is the previous target embedding concatenated
  with the previous attentional hidden state); MLP attention
  ``score = w . tanh(W_e enc + W_q rnn_out)`` without biases; hidden state
  ``tanh(FC([rnn_out; context]))``; output FC to the target vocabulary.

That is 27,734,558 parameters, and the heaviest tensor is the *first* one, the
8.8M-parameter source embedding — P3 §5.2: "unlike image classification models,
the heaviest layer in this model is the initial layer".

Input (:class:`~synclab.models.spec.InputSpec` kind ``tokens``): an int64
tensor ``(batch, 2, seq_len)``, row 0 the source sentence, row 1 the target
sentence shifted right behind <s>. The output is ``(batch, target_vocab,
seq_len)`` logits — class dimension second, so ``nn.CrossEntropyLoss`` takes
it directly against ``(batch, seq_len)`` targets. Sentences have a fixed
length ``seq_len`` (P3's variable-length buckets are not modelled).
"""

from __future__ import annotations

import torch
from torch import nn

from synclab.models.spec import InputSpec, ModelOptionError, positive_int

SOURCE_VOCAB = 17_192
TARGET_VOCAB = 7_710
SPECIAL_SYMBOLS = 4  # <pad>=0, <unk>=1, <s>=2, </s>=3
BOS = 2
INIT_SCALE = 0.1  # --weight-init uniform --weight-init-scale 0.1


class _Embedding(nn.Embedding):
    def reset_parameters(self) -> None:
        # Uniform like every other tensor here; also keeps meta-device builds off the slow normal_ path.
        nn.init.uniform_(self.weight, -INIT_SCALE, INIT_SCALE)


class Sockeye(nn.Module):
    def __init__(self, source_vocab: int, target_vocab: int, embed: int, hidden: int, layers: int,
                 attention_hidden: int):
        super().__init__()
        if hidden % 2:
            raise ModelOptionError(f"model option 'hidden' must be even (a bidirectional first layer), got {hidden}")
        self.layers = layers
        self.source_embed = _Embedding(source_vocab, embed)
        self.encoder_birnn = nn.LSTM(embed, hidden // 2, batch_first=True, bidirectional=True)
        self.encoder_rnn = nn.LSTM(hidden, hidden, num_layers=layers - 1, batch_first=True) if layers > 1 else None
        # One FC per decoder state: (h, c) of each layer, from the last encoder state.
        self.state_init = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(2 * layers))
        self.target_embed = _Embedding(target_vocab, embed)
        self.attention_source = nn.Linear(hidden, attention_hidden, bias=False)
        self.decoder_cells = nn.ModuleList(
            nn.LSTMCell(embed + hidden if i == 0 else hidden, hidden) for i in range(layers))
        self.attention_query = nn.Linear(hidden, attention_hidden, bias=False)
        self.attention_score = nn.Linear(attention_hidden, 1, bias=False)
        self.hidden_fc = nn.Linear(2 * hidden, hidden)
        self.output = nn.Linear(hidden, target_vocab)
        for p in self.parameters():
            nn.init.uniform_(p, -INIT_SCALE, INIT_SCALE)

    def encode(self, source: torch.Tensor) -> torch.Tensor:
        x = self.source_embed(torch.flip(source, dims=[1]))  # --rnn-encoder-reverse-input
        x, _ = self.encoder_birnn(x)
        if self.encoder_rnn is not None:
            x, _ = self.encoder_rnn(x)
        return x  # (batch, src_len, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 3 or x.shape[1] != 2:
            raise ValueError(f"sockeye expects (batch, 2, seq_len) token ids, got shape {tuple(x.shape)}")
        encoded = self.encode(x[:, 0])
        last = encoded[:, -1]
        init = [torch.tanh(fc(last)) for fc in self.state_init]
        states = [(init[2 * i], init[2 * i + 1]) for i in range(self.layers)]
        target = self.target_embed(x[:, 1])
        source_keys = self.attention_source(encoded)  # (batch, src_len, att)
        hidden = encoded.new_zeros(encoded.shape[0], self.hidden_fc.out_features)
        outputs = []
        for t in range(target.shape[1]):
            inp = torch.cat([target[:, t], hidden], 1)  # input feeding
            for i, cell in enumerate(self.decoder_cells):
                states[i] = cell(inp, states[i])
                inp = states[i][0]
            query = self.attention_query(inp).unsqueeze(1)
            scores = self.attention_score(torch.tanh(source_keys + query)).squeeze(2)  # (batch, src_len)
            context = torch.bmm(torch.softmax(scores, 1).unsqueeze(1), encoded).squeeze(1)
            hidden = torch.tanh(self.hidden_fc(torch.cat([inp, context], 1)))
            outputs.append(hidden)
        logits = self.output(torch.stack(outputs, 1))  # (batch, tgt_len, vocab)
        return logits.transpose(1, 2)


def sockeye(*, source_vocab: int = SOURCE_VOCAB, target_vocab: int = TARGET_VOCAB, embed: int = 512,
            hidden: int = 512, layers: int = 2, attention_hidden: int = 512, seq_len: int = 32) -> Sockeye:
    """``seq_len`` (default 32; IWSLT15 sentences average ~20 words) only shapes the input spec."""
    positive_int("seq_len", seq_len)
    vocabs = {"source_vocab": source_vocab, "target_vocab": target_vocab}
    for option, v in vocabs.items():
        if positive_int(option, v) <= SPECIAL_SYMBOLS:
            raise ModelOptionError(f"model option {option!r} must exceed the {SPECIAL_SYMBOLS} special symbols, "
                                   f"got {v}")
    return Sockeye(source_vocab, target_vocab, positive_int("embed", embed), positive_int("hidden", hidden),
                   positive_int("layers", layers), positive_int("attention_hidden", attention_hidden))


def sockeye_input(*, source_vocab: int, target_vocab: int, seq_len: int, **_) -> InputSpec:
    return InputSpec("tokens", (2, positive_int("seq_len", seq_len)), positive_int("target_vocab", target_vocab),
                     source_vocab=positive_int("source_vocab", source_vocab))
