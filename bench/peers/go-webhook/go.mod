module trainenv.io/bench/go-webhook

go 1.19
