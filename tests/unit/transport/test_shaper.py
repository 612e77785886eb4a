import pytest

from synclab.transport.shaper import LinkShaper, TokenBucket


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t

    def sleep(self, s):
        self.t += s


def test_token_bucket_paces_to_rate():
    clock = FakeClock()
    b = TokenBucket(8e6, burst_bytes=1000, clock=clock, sleep=clock.sleep)  # 1 MB/s
    for _ in range(1000):
        b.consume(1000)
    # 1 MB at 1 MB/s, minus the initial 1000-byte burst
    assert clock.t == pytest.approx(0.999, rel=1e-9)


def test_token_bucket_burst_is_capped():
    clock = FakeClock()
    b = TokenBucket(8e6, burst_bytes=1000, clock=clock, sleep=clock.sleep)
    clock.t = 100.0  # long idle: still only one burst of credit
    assert b.consume(1000) == 0
    assert b.consume(1000) == pytest.approx(0.001)


def test_default_burst_covers_a_chunk():
    s = LinkShaper(rate_bps=100e6, chunk_bytes=1 << 20)
    assert s.bucket.burst_bytes >= 1 << 20
    assert LinkShaper(rate_bps=100e9).bucket.burst_bytes == int(100e9 / 8 * 0.004)


def test_shaper_validation_and_state():
    with pytest.raises(ValueError):
        TokenBucket(0)
    with pytest.raises(ValueError):
        LinkShaper(delay_s=-1)
    s = LinkShaper()
    assert not s.active and s.rate_bps is None
    s.set_rate(1e9)
    assert s.active and s.rate_bps == pytest.approx(1e9)


def test_backlogged_sender_gets_lost_time_back_but_idle_one_does_not():
    clock = FakeClock()
    b = TokenBucket(8e6, burst_bytes=1000, clock=clock, sleep=clock.sleep)  # 1 MB/s, 50 ms catch-up = 50 kB
    b.consume(1000)
    clock.t += 0.02  # descheduled for 20 ms with data waiting: 20 kB of credit kept
    assert b.consume(20_000, backlogged=True) == 0
    clock.t += 0.02  # idle for 20 ms: only the 1000-byte burst
    assert b.consume(20_000) == pytest.approx(0.019)
