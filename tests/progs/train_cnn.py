# train_cnn.py: what users profile — PyTorch's import, then a small CNN trained for a few steps on
# made-up images (a fixed seed: the same work every run), optionally fed by a DataLoader with
# worker processes (forked: each a process libprof follows).
# usage: train_cnn.py [STEPS [WORKERS]]   (default 10 steps, 0 workers: the batches made in place)
# Prints the last loss.
import sys

import torch
import torch.nn as nn

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 10
workers = int(sys.argv[2]) if len(sys.argv) > 2 else 0
torch.manual_seed(0)
torch.set_num_threads(2)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(32 * 8 * 8, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = self.pool(torch.relu(self.conv1(x)))
        x = self.pool(torch.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        return self.fc2(torch.relu(self.fc1(x)))


class Images(torch.utils.data.Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(1)
        self.x = torch.randn(n, 3, 32, 32, generator=g)
        self.y = torch.randint(0, 10, (n,), generator=g)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
loss_fn = nn.CrossEntropyLoss()
data = Images(32 * steps)
if workers:
    batches = torch.utils.data.DataLoader(data, batch_size=32, num_workers=workers)
else:
    batches = ((data.x[i * 32:(i + 1) * 32], data.y[i * 32:(i + 1) * 32]) for i in range(steps))
loss = None
for x, y in batches:
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
print("loss %.4f" % loss.item())
