"""What a CUDA user's paths do, shown on a machine without one: torch.cuda's answers (how many GPUs, their free
memory, their compute capability, an out-of-memory error) are faked, and each check fails without its fix.

The real thing runs in tests/gpu/test_cuda.py (`-m cuda`, on a GPU)."""

import json

import pytest
import torch

from bertviz_lab import cli
from bertviz_lab.bert import device as devices
from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.bert.precision import autocast_dtype, loss_scaler
from bertviz_lab.bert.rng import global_rng
from bertviz_lab.errors import CheckpointError, ConfigError, DeviceError, GpuMemoryError
from bertviz_lab.finetune import runs as ft_runs
from bertviz_lab.finetune.config import FinetuneConfig
from bertviz_lab.pretrain import checkpoints, distributed, resources
from bertviz_lab.pretrain.config import TrainConfig
from bertviz_lab.pretrain.loop import Trainer
from bertviz_lab.ui.shell.state import SHIPPED
from tests.helpers.lab import app_test
from tests.helpers.paths import ROOT

GB = 1_000_000_000
MINI = SHIPPED / "bertviz-mini"
pytestmark = pytest.mark.usefixtures("one_thread")


def small(**changes) -> TrainConfig:
    base = dict(preset="tiny", hidden=32, heads=2, layers=2, batch_size=8, seq_len=32, steps=4, lr=5e-3, warmup=1,
                eval_every=2, eval_batches=1, checkpoint_every=2, device="cpu", threads=1)
    return TrainConfig(**{**base, **changes})


@pytest.fixture
def gpus(monkeypatch):
    """fake(count, free=..., total=..., capability=...): torch.cuda as a machine with `count` such GPUs says it."""

    def fake(count: int, free: int = 70 * GB, total: int = 80 * GB, capability=(9, 0)):
        frees = free if isinstance(free, list) else [free] * count
        monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
        monkeypatch.setattr(torch.cuda, "mem_get_info", lambda i=None: (frees[i or 0], total))
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=None: capability)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=None: "Fake GPU")

    return fake


# --- 1. resume with fewer GPUs -------------------------------------------------------------------------------
def test_a_run_saved_with_four_gpus_visible_resumes_on_two(tmp_path, gpus, monkeypatch):
    """Checkpoints kept every visible GPU's generator (get_rng_state_all), and set_rng_state_all raised IndexError
    on a machine with fewer: now only the run's own GPU's generator is restored, from either kind of file."""
    trainer = Trainer(small(), run_dir=tmp_path)
    trainer.save()
    state_file = checkpoints.latest(tmp_path) / checkpoints.STATE_FILE
    state = torch.load(state_file, weights_only=True)
    four = [torch.full((16,), i, dtype=torch.uint8) for i in range(4)]
    torch.save({**state, "cuda_rng": four}, state_file)  # as a 4-GPU machine saved it before the fix

    gpus(2)
    restored = []
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", lambda states: [][len(states) - 1])  # IndexError, as real
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda s, device: restored.append((int(s[0]), device)))
    monkeypatch.setattr(checkpoints, "device_of", lambda model: torch.device("cuda", 1))
    fresh = Trainer(small(), run_dir=tmp_path)
    checkpoints.load_latest(tmp_path, fresh.model, fresh.optimizer, fresh.scheduler)
    assert restored == [(1, torch.device("cuda", 1))]  # cuda:1's own generator, from the list's entry 1


def test_the_saved_generator_is_the_runs_own_gpus():
    own = torch.zeros(16, dtype=torch.uint8)
    assert checkpoints.own_cuda_rng(own, 3) is own  # today's files: one tensor, whatever the GPU's number
    listed = [torch.full((4,), i, dtype=torch.uint8) for i in range(2)]
    assert int(checkpoints.own_cuda_rng(listed, 1)[0]) == 1
    assert checkpoints.own_cuda_rng(listed, 3) is None  # that machine had no cuda:3: nothing to restore
    assert checkpoints.own_cuda_rng(None, 0) is None and checkpoints.own_cuda_rng("junk", 0) is None


def test_a_state_file_that_holds_the_wrong_things_is_one_sentence(tmp_path):
    trainer = Trainer(small(), run_dir=tmp_path)
    trainer.save()
    state_file = checkpoints.latest(tmp_path) / checkpoints.STATE_FILE
    state = torch.load(state_file, weights_only=True)
    torch.save({**state, "torch_rng": torch.zeros(3, dtype=torch.uint8)}, state_file)
    with pytest.raises(CheckpointError, match="does not hold a trainer's state"):
        Trainer(small(), run_dir=tmp_path, resume=True)


# --- 2. torchrun --resume of a CPU run ---------------------------------------------------------------------
def test_torchrun_resume_opens_the_group_for_the_runs_recorded_device(tmp_path, gpus, monkeypatch):
    """The group was opened for "auto" (NCCL on a GPU machine) before run.json was read; a CPU run's tensors then
    failed in NCCL's all-reduce. Now a resume opens it for the device the run was started on."""
    from bertviz_lab.pretrain import process

    gpus(2)
    (tmp_path / "run.json").write_text(json.dumps({"kind": "pretrain", "config": small().to_dict()}))
    opened = []

    class Session:
        def __init__(self, device):
            opened.append(device)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(distributed, "session", Session)
    monkeypatch.setattr(process, "execute", lambda *args, **kwargs: 0)
    assert cli.main(["train", "--run-dir", str(tmp_path), "--resume"]) == 0
    assert opened == ["cpu"]
    assert process.recorded_device(tmp_path / "missing") == "cpu"  # unreadable: gloo, and execute refuses it
    (tmp_path / "run.json").write_text(json.dumps({"kind": "pretrain", "config": {"steps": 4}}))
    assert process.recorded_device(tmp_path) == "auto"  # from before the setting: as TrainConfig reads it


# --- 3. out of GPU memory while loading --------------------------------------------------------------------
def test_a_model_too_big_for_the_gpus_free_memory_is_one_sentence(gpus):
    gpus(1, free=1_000_000)  # 1 MB free: bertviz-mini's weights are ~13 MB
    with pytest.raises(GpuMemoryError, match=r"needs about .* of GPU memory and cuda:0 has 1 MB free"):
        load_checkpoint(MINI, device="cuda:0")


def test_running_out_of_gpu_memory_during_the_move_is_one_sentence_and_frees_the_copy(gpus, monkeypatch):
    gpus(1)
    model = torch.nn.Linear(4, 4)
    moved = []

    def to(device):
        moved.append(str(device))
        if torch.device(device).type == "cuda":
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 MiB")
        return model

    monkeypatch.setattr(model, "to", to)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: moved.append("emptied"))
    with pytest.raises(GpuMemoryError, match="run it on the CPU"):
        devices.to_device(model, "cuda")
    assert moved == ["cuda", "cpu", "emptied"]  # the partial copy back on the host, the GPU's cache released


def test_the_cli_says_so_instead_of_a_traceback(gpus, capsys):
    gpus(1, free=1_000_000)
    assert cli.main(["predict", "--checkpoint", str(MINI), "--device", "cuda", "The cat sat on the [MASK]."]) == 2
    assert "of GPU memory" in capsys.readouterr().err


def test_the_app_keeps_two_models_on_a_gpu_and_lets_them_go_when_the_next_does_not_fit(monkeypatch):
    from bertviz_lab.ui.shell import models

    models.forget_models()
    loads, released = [], []

    def load(path, device):
        loads.append(path)
        if path == "big" and not released:
            raise GpuMemoryError("the model in big needs about 2 GB of GPU memory")
        if path == "huge":
            raise GpuMemoryError("the model in huge needs about 200 GB of GPU memory", could_fit=False)
        return path

    monkeypatch.setattr(models, "load_checkpoint", lambda path, device: load(path, device))
    real_release = models.release_gpu_models
    monkeypatch.setattr(models, "release_gpu_models", lambda: (released.append(True), real_release()))
    try:
        assert [models.cached_checkpoint(p, "cuda") for p in ("a", "b", "a", "b")] == ["a", "b", "a", "b"]
        assert loads == ["a", "b"]  # two on the GPU: both stay loaded
        models.cached_checkpoint("c", "cuda")
        models.cached_checkpoint("a", "cuda")
        assert loads == ["a", "b", "c", "a"]  # a third pushed the oldest out: GPU_MODELS == 2
        assert models.cached_checkpoint("big", "cuda") == "big"  # the GPU's models let go, then loaded alone
        assert loads[-2:] == ["big", "big"] and released == [True]
        with pytest.raises(GpuMemoryError, match="200 GB"):
            models.cached_checkpoint("huge", "cuda")
        assert released == [True]  # bigger than the whole GPU: the class's models were not let go for nothing
        models.cached_checkpoint("a", "cpu")
        assert loads[-1] == "a"  # the CPU keeps its own six
    finally:
        models.forget_models()


def test_a_page_that_runs_out_of_gpu_memory_says_what_to_do(monkeypatch):
    """An out-of-memory error in the middle of a page's pass ends the page with a sentence, not a traceback."""
    from bertviz_lab.ui.shell import models

    def out_of_memory(*args):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 MiB")

    at = app_test(ROOT / "app.py")
    at.run()  # AppTest's first run is Home's, through app.py's router
    monkeypatch.setattr(models, "cached_checkpoint", out_of_memory)  # what the page's first pass asks for
    at.switch_page("pages/predict.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("ran out of memory for this page" in e.value and "choose CPU" in e.value for e in at.error)


def test_a_run_that_runs_out_of_gpu_memory_fails_with_a_sentence_and_keeps_its_checkpoint(tmp_path, monkeypatch):
    from bertviz_lab.pretrain import process, runs

    real_step = Trainer.train_step

    def step(self):
        if self.step == 2:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real_step(self)

    monkeypatch.setattr(Trainer, "train_step", step)
    assert process.execute(tmp_path, small(checkpoint_every=2), False, ["train"]) == 1
    info = runs.read(tmp_path)
    assert info.status == "failed" and info.message.startswith("the GPU ran out of memory at step 2: lower the batch")
    assert checkpoints.latest(tmp_path).name == "step-000002"  # the last good checkpoint is kept


# --- 4. precision on pre-Ampere GPUs -----------------------------------------------------------------------
@pytest.mark.parametrize(("capability", "dtype"), [((7, 0), torch.float16), ((7, 5), torch.float16),
                                                   ((8, 0), torch.bfloat16), ((9, 0), torch.bfloat16)])
def test_auto_precision_is_bf16_only_where_the_gpu_has_bf16_units(gpus, capability, dtype):
    gpus(1, capability=capability)
    assert autocast_dtype("auto", torch.device("cuda")) == dtype
    assert autocast_dtype("bf16", torch.device("cuda")) == torch.bfloat16  # asked for by name: as asked
    assert autocast_dtype("fp32", torch.device("cuda")) is None
    assert loss_scaler(dtype, torch.device("cuda")).is_enabled() == (dtype == torch.float16)


def test_fp16_training_scales_its_loss_skips_overflowing_steps_and_resumes_with_its_scale(tmp_path, monkeypatch):
    """fp16 runs under CPU autocast here, standing in for a T4's: the scaler is on, an overflowing step is skipped
    (the weights unchanged, the scale halved) and not called a divergence, and a resume keeps the scale."""
    import bertviz_lab.pretrain.loop as loop

    monkeypatch.setattr(loop, "autocast_dtype", lambda precision, device: torch.float16)
    trainer = Trainer(small(), run_dir=tmp_path)
    assert trainer.scaler.is_enabled()
    trainer.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**120)  # the first steps' gradients overflow fp16
    before = [p.detach().clone() for p in trainer.model.parameters()]
    metrics, ok = trainer.train_step()
    assert ok and metrics.grad_norm is None  # skipped, not diverged
    assert all(torch.equal(a, p) for a, p in zip(before, trainer.model.parameters(), strict=True))
    assert trainer.scaler.get_scale() == 2.0**119
    trainer.scaler.update(new_scale=2.0**8)  # where the scale would get to after a hundred halvings
    metrics, ok = trainer.train_step()
    assert ok and metrics.grad_norm > 0  # this step counts: the weights moved
    assert not all(torch.equal(a, p) for a, p in zip(before, trainer.model.parameters(), strict=True))
    scale = trainer.scaler.get_scale()
    trainer.save()
    resumed = Trainer(small(), run_dir=tmp_path, resume=True)
    assert resumed.scaler.get_scale() == scale and resumed.step == trainer.step
    assert resumed.train_step()[1]
    resumed.scaler.update(new_scale=0.5)  # where only step after step of overflowing gradients takes it
    assert resumed.train_step()[1] is False  # diverged: the run stops and keeps its last good checkpoint


# --- 5. memory checks count what is free on the run's GPU --------------------------------------------------
BASE = dict(preset="base", batch_size=32, seq_len=128, device="cuda")


def test_a_run_is_checked_against_the_gpus_free_memory_not_its_total(gpus, monkeypatch):
    from bertviz_lab import files

    monkeypatch.setattr(files, "free_memory_bytes", lambda: 2 * GB)  # the host: enough for the process
    gpus(1, free=70 * GB)
    resources.check_resources(TrainConfig(**BASE))
    gpus(1, free=2 * GB)  # other runs and the app's models hold 78 GB of the 80
    with pytest.raises(ConfigError, match=r"of GPU memory; cuda:0 has 2 GB free of 80 GB"):
        resources.check_resources(TrainConfig(**BASE))


def test_on_a_gpu_the_estimate_leaves_out_the_attention_matrices_sdpa_does_not_keep():
    cfg = TrainConfig(**BASE)
    vocab, model = 30522, cfg.model_config(30522)
    h, L, T = model.num_attention_heads, model.num_hidden_layers, cfg.seq_len
    kept = resources.estimate_memory(cfg, vocab) - resources.estimate_memory(cfg, vocab, fused_attention=True)
    assert kept == 4 * cfg.batch_size * T * (L + 1) * 3 * h * T


def test_a_finetuning_run_is_checked_against_the_gpu_too(gpus, monkeypatch):
    from bertviz_lab import files

    monkeypatch.setattr(files, "free_memory_bytes", lambda: 64 * GB)  # plenty on the host: the old check passed
    gpus(1, free=10_000_000)
    cfg = FinetuneConfig(task="coherence", scratch="mini", device="cuda", batch_size=256, seq_len=128)
    with pytest.raises(ConfigError, match="of GPU memory"):
        ft_runs.check(cfg)
    ft_runs.check(FinetuneConfig(task="coherence", scratch="mini", device="cpu", batch_size=256, seq_len=128))


def test_runs_the_app_starts_go_to_the_gpu_with_the_most_free_memory(gpus, monkeypatch, tmp_path):
    """A class's runs all landed on cuda:0. The app now shows each new run only the freest GPU and keeps "auto" in
    its settings (a resume chooses again); the form checks the run against that GPU, not cuda:0."""
    from bertviz_lab import files
    from bertviz_lab.pretrain import runs
    from bertviz_lab.views.pretrain.live import form_config

    monkeypatch.setattr(files, "free_memory_bytes", lambda: 2 * GB)
    gpus(3, free=[2 * GB, 60 * GB, 30 * GB])
    assert [resources.place(d) for d in ("auto", "cuda", "cpu", "cuda:2")] == [1, 1, None, None]
    form_config({**BASE, "device": "auto"})  # cuda:0 has 2 GB free, cuda:1 60: not refused
    launched = []
    monkeypatch.setattr(runs, "_launch", lambda run_dir, command, steps, by, placed: launched.append(
        (json.loads((run_dir / "run.json").read_text())["config"]["device"], placed)))
    runs.start(small(device="auto"), "placed", root=tmp_path)
    assert launched == [("auto", 1)]
    assert resources.gpu_env(1) == {"CUDA_VISIBLE_DEVICES": "1"} and resources.gpu_env(None) == {}
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6,7")  # this process sees three of the machine's GPUs
    assert resources.gpu_env(1) == {"CUDA_VISIBLE_DEVICES": "6"}
    gpus(1, free=2 * GB)
    assert resources.place("auto") is None  # one GPU: nothing to choose
    with pytest.raises(ConfigError, match="cuda:0 has 2 GB free"):
        form_config({**BASE, "device": "auto"})


def test_under_torchrun_each_rank_checks_its_own_gpu(gpus, monkeypatch):
    from bertviz_lab import files

    monkeypatch.setattr(files, "free_memory_bytes", lambda: 2 * GB)
    gpus(2, free=[70 * GB, 2 * GB])
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "0")
    resources.check_resources(TrainConfig(**BASE))
    monkeypatch.setenv("LOCAL_RANK", "1")  # rank 1 trains on cuda:1, which has 2 GB free: it was checked on cuda:0
    with pytest.raises(ConfigError, match="cuda:1 has 2 GB free"):
        resources.check_resources(TrainConfig(**BASE))


# --- 6. a GPU number the machine does not have -------------------------------------------------------------
def test_a_gpu_number_past_this_machines_is_refused_with_the_ones_it_has(gpus, capsys):
    gpus(1)
    assert devices.resolve_device("cuda:0") == torch.device("cuda", 0)
    with pytest.raises(DeviceError, match=r"cuda:7 is not on this machine: it has 1 CUDA GPU \(cuda:0\)"):
        devices.resolve_device("cuda:7")
    with pytest.raises(DeviceError, match="write cuda or cuda:N"):
        devices.resolve_device("cuda:x")
    assert cli.main(["classify", "--checkpoint", str(MINI), "--device", "cuda:7", "a sentence"]) == 2
    assert "cuda:7 is not on this machine" in capsys.readouterr().err
    gpus(4)
    with pytest.raises(DeviceError, match=r"it has 4 CUDA GPUs \(cuda:0 to cuda:3\)"):
        resources.check_resources(TrainConfig(device="cuda:4"))


# --- 7. helpers that keep others' random numbers -----------------------------------------------------------
def test_global_rng_puts_every_gpus_generator_back(gpus, monkeypatch):
    """fork_rng(devices=[]) saved only the CPU's generator while torch.manual_seed reseeded every GPU's."""
    gpus(2)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)  # this process has used CUDA
    states = {0: torch.tensor([10], dtype=torch.uint8), 1: torch.tensor([11], dtype=torch.uint8)}
    monkeypatch.setattr(torch.cuda, "get_rng_state", lambda device=0: states[device])
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda s, device=0: states.update({device: s}))
    monkeypatch.setattr(torch.cuda, "manual_seed_all", lambda seed: states.update(
        {i: torch.tensor([seed], dtype=torch.uint8) for i in states}))
    with global_rng(5):
        assert [int(s) for s in states.values()] == [5, 5]  # seeded inside, as torch.manual_seed does
    assert [int(s) for s in states.values()] == [10, 11]  # and each GPU's own state back afterwards


# --- 8. DDP details ----------------------------------------------------------------------------------------
def test_each_rank_binds_its_group_to_its_gpu_and_a_rank_past_the_gpus_is_one_sentence(gpus, monkeypatch):
    import torch.distributed as dist

    gpus(2)
    opened, chosen = [], []
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(dist, "init_process_group", lambda backend, device_id=None: opened.append((backend, device_id)))
    monkeypatch.setattr(dist, "destroy_process_group", lambda: None)
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    monkeypatch.setenv("LOCAL_RANK", "1")
    with distributed.session("cuda"):
        pass
    assert opened == [("nccl", torch.device("cuda", 1))] and chosen == [torch.device("cuda", 1)]
    monkeypatch.setenv("LOCAL_RANK", "3")
    refused = pytest.raises(DeviceError, match=r"local rank 3, but this machine has 2 CUDA GPUs.*--nproc_per_node=2")
    with refused, distributed.session("cuda"):
        pass
