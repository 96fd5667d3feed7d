"""A plain PyTorch DDP script, as you would write it for torchrun: nothing of ddpjob's but
the optional progress record. ddpjob-launch runs it under torchrun, which sets RANK,
LOCAL_RANK and WORLD_SIZE for each process (the job's Pods set the rest)."""

import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

try:  # in the trainer image: a progress record the operator shows in `kubectl get ddpj`
    from ddpjob import progress_record
except ImportError:  # elsewhere: no record
    progress_record = None  # type: ignore[assignment]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")  # RANK, WORLD_SIZE, MASTER_* from the environment
    rank, local_rank = dist.get_rank(), int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)

    torch.manual_seed(0)  # the same data on every rank; the sampler gives each its share
    data = TensorDataset(torch.randn(1024, 20), torch.randint(0, 2, (1024,)))
    sampler: DistributedSampler[int] = DistributedSampler(data)
    loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2)).to(device))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    total_steps, step = args.epochs * len(loader), 0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x.to(device)), y.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
        if rank == 0:
            print(f"epoch {epoch + 1}/{args.epochs} step {step} loss {loss.item():.4f}", flush=True)
            if progress_record is not None and os.environ.get("DDPJOB_PROGRESS_FILE"):
                progress_record.write(
                    os.environ["DDPJOB_PROGRESS_FILE"],
                    step=step,
                    total_steps=total_steps,
                    epoch=epoch + 1,
                    total_epochs=args.epochs,
                    loss=loss.item(),
                )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
