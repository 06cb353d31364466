package io.disaggusage.extproc.cli;

import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Handles SIGTERM and SIGINT itself, so a signalled server shuts down gracefully and then exits with
 * status 0 instead of the JVM's 143/130. Uses {@code sun.misc.Signal} (module jdk.unsupported) through
 * reflection; where it is unavailable the JVM's own handling (shutdown hooks) stays in place.
 */
public final class Signals implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(Signals.class);
  private static final String[] NAMES = {"TERM", "INT"};

  private final Method handle;
  private final Map<Object, Object> previous;

  private Signals(Method handle, Map<Object, Object> previous) {
    this.handle = handle;
    this.previous = previous;
  }

  /**
   * Installs {@code onSignal} (given the signal name, e.g. {@code TERM}) for SIGTERM and SIGINT until
   * {@link #close()} puts the previous handlers back.
   */
  public static Signals onTermination(Consumer<String> onSignal) {
    Map<Object, Object> previous = new LinkedHashMap<>();
    Method handle = null;
    try {
      Class<?> signalClass = Class.forName("sun.misc.Signal");
      Class<?> handlerClass = Class.forName("sun.misc.SignalHandler");
      Constructor<?> create = signalClass.getConstructor(String.class);
      handle = signalClass.getMethod("handle", signalClass, handlerClass);
      Method getName = signalClass.getMethod("getName");
      Object handler =
          Proxy.newProxyInstance(
              handlerClass.getClassLoader(),
              new Class<?>[] {handlerClass},
              (proxy, method, args) -> {
                switch (method.getName()) {
                  case "handle" -> {
                    onSignal.accept((String) getName.invoke(args[0]));
                    return null;
                  }
                  case "equals" -> {
                    return proxy == args[0];
                  }
                  case "hashCode" -> {
                    return System.identityHashCode(proxy);
                  }
                  default -> {
                    return "disagg-usage-extproc signal handler";
                  }
                }
              });
      for (String name : NAMES) {
        Object signal = create.newInstance(name);
        previous.put(signal, handle.invoke(null, signal, handler));
      }
      return new Signals(handle, previous);
    } catch (ReflectiveOperationException | RuntimeException | LinkageError e) {
      log.debug("signal handlers not installed ({}); relying on shutdown hooks", e.toString());
      new Signals(handle, previous).close();
      return new Signals(null, Map.of());
    }
  }

  /** Restores the handlers that were installed before. */
  @Override
  public void close() {
    if (handle == null) {
      return;
    }
    for (Map.Entry<Object, Object> entry : previous.entrySet()) {
      try {
        handle.invoke(null, entry.getKey(), entry.getValue());
      } catch (ReflectiveOperationException | RuntimeException e) {
        log.debug("could not restore handler for {}: {}", entry.getKey(), e.toString());
      }
    }
  }
}
