/tmp/ls-bin/realistic_scene --minutes 11 --buffer-churn 1000 --warmup 60 --floor
