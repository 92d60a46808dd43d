import tiny

tiny.train()
