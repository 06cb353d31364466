package io.disaggusage.extproc.logging;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;

class RateLimitedLogTest {
  private static final long SECOND = 1_000_000_000L;

  private final AtomicLong clock = new AtomicLong(123 * SECOND);
  private Logger logger;
  private ListAppender<ILoggingEvent> events;

  @BeforeEach
  void attach() {
    LoggerContext context = (LoggerContext) LoggerFactory.getILoggerFactory();
    logger = context.getLogger("test.rate-limited." + System.nanoTime());
    logger.setLevel(Level.WARN);
    logger.setAdditive(false);
    events = new ListAppender<>();
    events.setContext(context);
    events.start();
    logger.addAppender(events);
  }

  @AfterEach
  void detach() {
    logger.detachAppender(events);
    events.stop();
  }

  private RateLimitedLog limited(int permits, Duration interval) {
    return new RateLimitedLog(logger, permits, interval, clock::get);
  }

  @Test
  void oneWarningPerIntervalThenTheCountOfSuppressedOnesWithTheNext() {
    RateLimitedLog log = limited(1, Duration.ofSeconds(10));

    assertThat(log.warn("store failed with {}", "IOException")).isTrue();
    clock.addAndGet(SECOND);
    assertThat(log.warn("store failed with {}", "IOException")).isFalse();
    clock.addAndGet(8 * SECOND);
    assertThat(log.warn("store failed with {}", "TimeoutException")).isFalse();
    assertThat(log.suppressed()).isEqualTo(2);
    assertThat(events.list).hasSize(1);

    clock.addAndGet(SECOND); // 10 s after the first: a new interval
    assertThat(log.warn("store failed with {}", "IOException")).isTrue();
    assertThat(log.suppressed()).isZero();
    clock.addAndGet(10 * SECOND);
    assertThat(log.warn("store failed with {}", "IOException")).isTrue();

    assertThat(events.list)
        .extracting(ILoggingEvent::getFormattedMessage)
        .containsExactly(
            "store failed with IOException",
            "store failed with IOException (2 similar warnings suppressed)",
            "store failed with IOException");
    assertThat(events.list).allMatch(e -> e.getLevel() == Level.WARN);
  }

  @Test
  void severalPermitsPerInterval() {
    RateLimitedLog log = limited(3, Duration.ofMillis(500));
    int logged = 0;
    for (int i = 0; i < 10; i++) {
      logged += log.warn("w{}", i) ? 1 : 0;
    }
    assertThat(logged).isEqualTo(3);
    clock.addAndGet(SECOND / 2);
    log.warn("w{}", 10);
    assertThat(events.list)
        .extracting(ILoggingEvent::getFormattedMessage)
        .containsExactly("w0", "w1", "w2", "w10 (7 similar warnings suppressed)");
  }

  @Test
  void aTrailingThrowableStaysTheEventsException() {
    RateLimitedLog log = limited(1, Duration.ofSeconds(1));
    log.warn("first {}", "a", new IllegalStateException("x"));
    log.warn("dropped {}", "b", new IllegalStateException("y"));
    clock.addAndGet(SECOND);
    log.warn("third {}", "c", new IllegalStateException("z"));

    ILoggingEvent last = events.list.get(1);
    assertThat(last.getFormattedMessage()).isEqualTo("third c (1 similar warnings suppressed)");
    assertThat(last.getThrowableProxy().getMessage()).isEqualTo("z");
  }

  @Test
  void nothingIsCountedWhileWarningsAreOff() {
    logger.setLevel(Level.ERROR);
    RateLimitedLog log = limited(1, Duration.ofSeconds(1));
    assertThat(log.warn("a")).isFalse();
    assertThat(log.warn("b")).isFalse();
    assertThat(log.suppressed()).isZero();
    assertThat(events.list).isEmpty();
  }

  @Test
  void rejectsNonsenseLimits() {
    assertThatThrownBy(() -> limited(0, Duration.ofSeconds(1))).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> limited(1, Duration.ZERO)).isInstanceOf(IllegalArgumentException.class);
  }
}
