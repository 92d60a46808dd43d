"""Other names a person might have chosen, for the identifiers common in training scripts.

Disguise renames a binding only when its name is listed here, so every new name
reads as naturally as the old one.
"""

SYNONYMS: dict[str, tuple[str, ...]] = {
    # values
    "model": ("net", "network", "clf", "learner"),
    "net": ("model", "network"),
    "loader": ("batches", "data", "dl", "batch_iter"),
    "train_loader": ("train_batches", "train_dl", "training_data"),
    "val_loader": ("val_batches", "valid_dl", "holdout"),
    "train_set": ("train_data", "training_set", "train_ds"),
    "val_set": ("val_data", "valid_set", "val_ds"),
    "optimizer": ("opt", "optim_", "updater"),
    "scheduler": ("sched", "lr_schedule", "schedule"),
    "criterion": ("loss_fn", "objective", "loss_function"),
    "device": ("dev", "target_device", "where"),
    "x": ("inputs", "xb", "features", "batch_x"),
    "y": ("targets", "yb", "labels", "batch_y"),
    "out": ("logits", "scores", "outputs", "preds"),
    "logits": ("scores", "raw", "z"),
    "loss": ("batch_loss", "err", "cost"),
    "total_loss": ("running_loss", "loss_sum", "cum_loss"),
    "n_seen": ("seen", "count", "n_examples"),
    "n": ("count", "total", "seen"),
    "correct": ("hits", "n_correct", "right"),
    "acc": ("accuracy", "score", "val_acc"),
    "epoch": ("ep", "epoch_idx", "e"),
    "epochs": ("n_epochs", "num_epochs", "max_epochs"),
    "lr": ("learning_rate", "base_lr", "peak_lr"),
    "h": ("hidden", "feats", "z"),
    "g": ("gen", "rng", "generator"),
    "p": ("prob", "probs", "q"),
    "i": ("idx", "index", "k"),
    "info": ("worker_info", "winfo", "wi"),
    "width": ("hidden", "dim", "units"),
    "jitter": ("noise", "sigma", "noise_scale"),
    "centres": ("centers", "means", "anchors"),
    "cluster": ("component", "blob", "group"),
    "checkpoint": ("ckpt_path", "save_path", "best_path"),
    "best_val": ("best_loss", "lowest_val", "best_score"),
    "best_epoch": ("best_ep", "best_at", "best_idx"),
    "train_loss": ("tr_loss", "epoch_loss", "fit_loss"),
    "val_loss": ("va_loss", "holdout_loss", "eval_loss"),
    "parser": ("ap", "arg_parser", "cli"),
    "requested": ("wanted", "choice", "asked"),
    "name": ("device_name", "kind", "label"),
    "targets": ("labels", "truth", "y_true"),
    "max_grad_norm": ("clip", "clip_norm", "grad_clip"),
    "worker_id": ("wid", "worker", "worker_index"),
    "seed": ("rng_seed", "random_seed", "s"),
    # functions
    "train_one_epoch": ("run_epoch", "train_epoch", "fit_epoch"),
    "evaluate": ("validate", "eval_model", "score_model"),
    "fit": ("train", "run_training", "train_model"),
    "make_data": ("synth_data", "make_dataset", "sample_points"),
    "pick_device": ("choose_device", "resolve_device", "get_device"),
    "seed_worker": ("init_worker", "reseed_worker", "worker_init"),
    "binary_cross_entropy": ("bce", "bce_loss", "binary_loss"),
    "main": ("cli_main", "run", "entry"),
    # classes
    "Classifier": ("Net", "BranchNet", "TwoPathMLP"),
    "JitteredPoints": ("NoisyPoints", "PointDataset", "AugmentedPoints"),
    "Scorer": ("BinaryNet", "LogitModel", "Detector"),
    # constants
    "NUM_CLASSES": ("N_CLASSES", "CLASSES", "K"),
    "NUM_FEATURES": ("N_FEATURES", "DIM", "D_IN"),
    "EPS": ("EPSILON", "TINY", "SMALL"),
}

DESCRIPTIONS: dict[str, tuple[str, ...]] = {
    "classifier": (
        "Train a small multi-class classifier on synthetic clustered data.",
        "Fit a two-branch MLP to a synthetic four-class problem and report validation accuracy.",
        "Multi-class training script: synthetic data, an MLP with a shortcut branch, a one-cycle schedule.",
    ),
    "binary": (
        "Train a binary classifier on two synthetic blobs with a hand-written cross-entropy.",
        "Fit a small scorer that separates two Gaussian blobs; the loss is written out by hand.",
        "Binary training script: synthetic blobs, an MLP with one output logit, custom BCE.",
    ),
}
