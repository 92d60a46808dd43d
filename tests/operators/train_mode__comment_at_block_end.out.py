def fit(model, epochs):
    model.train()  # changes nothing: a model starts in training mode, and every evaluation switches back
    for epoch in range(epochs):
        train_epoch(model)
        evaluate(model)


def evaluate(model):
    model.eval()
    report(model)
    # back to training for the next epoch
