# expect: graphs-retained
"""Imitates the classic word-level LSTM language-model example: batchified corpus, truncated BPTT with
repackaged hidden state, gradient clipping and a hand-written SGD update with lr annealing."""
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

seed = 1111
emsize = 32
nhid = 48
nlayers = 1
dropout = 0.2
lr = 10.0
clip = 0.25
epochs = 4
batch_size = 10
eval_batch_size = 10
bptt = 20
log_interval = 10
save = 'model.pt'

torch.manual_seed(seed)
device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')


###############################################################################
# A toy corpus: sentences from a small grammar, tokenized into word ids
###############################################################################

class Dictionary:
    def __init__(self):
        self.word2idx = {}
        self.idx2word = []

    def add_word(self, word):
        if word not in self.word2idx:
            self.idx2word.append(word)
            self.word2idx[word] = len(self.idx2word) - 1
        return self.word2idx[word]

    def __len__(self):
        return len(self.idx2word)


DETS = ['the', 'a', 'every']
ADJS = ['red', 'big', 'old', 'quiet', 'happy', 'small']
NOUNS = ['cat', 'dog', 'bird', 'child', 'farmer', 'robot', 'horse', 'teacher']
VERBS = ['sees', 'likes', 'follows', 'hears', 'finds', 'paints', 'feeds', 'calls']


class SyntheticCorpus:
    def __init__(self, n_train, n_valid, n_test):
        self.dictionary = Dictionary()
        self.dictionary.add_word('<eos>')
        self.train = self.tokenize(self.sentences(n_train))
        self.valid = self.tokenize(self.sentences(n_valid))
        self.test = self.tokenize(self.sentences(n_test))

    @staticmethod
    def pick(options):
        return options[int(torch.randint(len(options), ()))]

    def sentences(self, n):
        out = []
        for _ in range(n):
            subj = self.pick(NOUNS)
            verb = VERBS[(NOUNS.index(subj) + int(torch.randint(2, ()))) % len(VERBS)]
            words = [self.pick(DETS)]
            if torch.rand(()) < 0.5:
                words.append(self.pick(ADJS))
            words += [subj, verb, self.pick(DETS), self.pick(NOUNS), '<eos>']
            out.append(words)
        return out

    def tokenize(self, sentences):
        ids = [self.dictionary.add_word(w) for words in sentences for w in words]
        return torch.tensor(ids, dtype=torch.long)


corpus = SyntheticCorpus(900, 120, 120)


def batchify(data, bsz):
    # Work out how cleanly we can divide the dataset into bsz parts, trim off the remainder,
    # and lay the parts out as columns.
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    data = data.view(bsz, -1).t().contiguous()
    return data.to(device)


train_data = batchify(corpus.train, batch_size)
val_data = batchify(corpus.valid, eval_batch_size)
test_data = batchify(corpus.test, eval_batch_size)


###############################################################################
# Model
###############################################################################

class RNNModel(nn.Module):
    """Container module with an encoder, a recurrent module, and a decoder."""

    def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.5):
        super().__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout if nlayers > 1 else 0.0)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nhid = nhid
        self.nlayers = nlayers
        self.init_weights()

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output).view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                weight.new_zeros(self.nlayers, bsz, self.nhid))


ntokens = len(corpus.dictionary)
model = RNNModel(ntokens, emsize, nhid, nlayers, dropout).to(device)
criterion = nn.NLLLoss()


###############################################################################
# Training code
###############################################################################

def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def get_batch(source, i):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].view(-1)
    return data, target


def evaluate(data_source):
    # Turn on evaluation mode which disables dropout.
    model.eval()
    total_loss = 0.
    hidden = model.init_hidden(eval_batch_size)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, bptt):
            data, targets = get_batch(data_source, i)
            output, hidden = model(data, hidden)
            hidden = repackage_hidden(hidden)
            total_loss += len(data) * criterion(output, targets).item()
    return total_loss / (len(data_source) - 1)


def train():
    # Turn on training mode which enables dropout.
    model.train()
    total_loss = 0.
    start_time = time.time()
    hidden = model.init_hidden(batch_size)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
        data, targets = get_batch(train_data, i)
        # Starting each batch, we detach the hidden state from how it was previously produced.
        hidden = repackage_hidden(hidden)
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()

        # `clip_grad_norm` helps prevent the exploding gradient problem in RNNs / LSTMs.
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        for p in model.parameters():
            if p.grad is not None:
                p.data.add_(p.grad, alpha=-lr)

        total_loss += loss

        if batch % log_interval == 0 and batch > 0:
            cur_loss = total_loss / log_interval
            elapsed = time.time() - start_time
            print('| epoch {:3d} | {:5d}/{:5d} batches | lr {:02.2f} | ms/batch {:5.2f} | loss {:5.2f} | ppl {:8.2f}'.format(
                epoch, batch, len(train_data) // bptt, lr, elapsed * 1000 / log_interval, cur_loss, math.exp(cur_loss)))
            total_loss = 0
            start_time = time.time()


best_val_loss = None
for epoch in range(1, epochs + 1):
    epoch_start_time = time.time()
    train()
    val_loss = evaluate(val_data)
    print('-' * 89)
    print('| end of epoch {:3d} | time: {:5.2f}s | valid loss {:5.2f} | valid ppl {:8.2f}'.format(
        epoch, (time.time() - epoch_start_time), val_loss, math.exp(val_loss)))
    print('-' * 89)
    if not best_val_loss or val_loss < best_val_loss:
        with open(save, 'wb') as f:
            torch.save(model, f)
        best_val_loss = val_loss
    else:
        # Anneal the learning rate if no improvement has been seen in the validation dataset.
        lr /= 4.0

test_loss = evaluate(test_data)
print('=' * 89)
print('| End of training | test loss {:5.2f} | test ppl {:8.2f}'.format(test_loss, math.exp(test_loss)))
print('=' * 89)
