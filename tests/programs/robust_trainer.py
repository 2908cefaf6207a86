# The second article's complete program ("complete fixed code": RobustModel,
# DeviceManager, Trainer), with the device bugs the article warns about put
# back in: a constant kept as a plain attribute, a tensor made in forward()
# from a shape, and .cuda() calls. tests/test_fakecuda.py lets fixdev rewrite
# it, then trains it for one step on a fake GPU.
import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset


class RobustModel(nn.Module):
    """A model that should handle devices correctly."""

    def __init__(self, input_dim=784, hidden_dim=256, num_classes=10):
        super(RobustModel, self).__init__()
        self.fc1 = nn.Linear(input_dim, hidden_dim)
        self.bn1 = nn.BatchNorm1d(hidden_dim)
        self.fc2 = nn.Linear(hidden_dim, hidden_dim)
        self.bn2 = nn.BatchNorm1d(hidden_dim)
        self.fc3 = nn.Linear(hidden_dim, num_classes)
        self.relu = nn.ReLU()
        self.dropout = nn.Dropout(0.3)
        # Bug: a plain attribute does not move with .to()
        self.noise_scale = torch.tensor([0.1])

    def forward(self, x):
        if self.training:
            # Bug: made on the CPU whatever device x is on
            noise = torch.randn(x.shape) * self.noise_scale
            x = x + noise
        x = self.relu(self.bn1(self.fc1(x)))
        x = self.dropout(x)
        x = self.relu(self.bn2(self.fc2(x)))
        x = self.dropout(x)
        return self.fc3(x)


class Trainer:
    """A complete trainer."""

    def __init__(self, model, lr=0.001):
        # Bug: .cuda() only works on a machine with CUDA
        self.model = model.cuda()
        self.criterion = nn.CrossEntropyLoss()
        self.optimizer = optim.Adam(model.parameters(), lr=lr)

    def train_epoch(self, train_loader):
        self.model.train()
        total_loss = 0
        for data, target in train_loader:
            # Bug: the key step, moving each batch, done with .cuda()
            data, target = data.cuda(), target.cuda()
            data = data.view(data.size(0), -1)
            self.optimizer.zero_grad()
            output = self.model(data)
            loss = self.criterion(output, target)
            loss.backward()
            self.optimizer.step()
            total_loss += loss.item()
        return total_loss / len(train_loader)


def main():
    torch.manual_seed(42)
    X_train = torch.randn(64, 784)
    y_train = torch.randint(0, 10, (64,))
    train_loader = DataLoader(TensorDataset(X_train, y_train), batch_size=32, shuffle=True)
    model = RobustModel(input_dim=784, hidden_dim=256, num_classes=10)
    trainer = Trainer(model, lr=0.001)
    return trainer.train_epoch(train_loader)


if __name__ == "__main__":
    print(main())
