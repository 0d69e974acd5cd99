package dev.spillway.bench;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.lang.reflect.Proxy;
import java.sql.SQLException;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;

class ForegroundProbeTest {

  @Test
  void should_fail_its_stop_naming_why_when_a_client_failed() {
    DataSource refusing =
        (DataSource)
            Proxy.newProxyInstance(
                getClass().getClassLoader(),
                new Class<?>[] {DataSource.class},
                (proxy, method, args) -> {
                  throw new SQLException("too many clients already");
                });
    ForegroundProbe probe = new ForegroundProbe(refusing, 2, 10);

    probe.start();

    assertThatThrownBy(probe::stop)
        .isInstanceOf(IllegalStateException.class)
        .hasMessage("The foreground probe failed: too many clients already");
  }
}
