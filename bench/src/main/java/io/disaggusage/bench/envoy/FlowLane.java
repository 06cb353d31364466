package io.disaggusage.bench.envoy;

import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoop;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.handler.codec.http.DefaultFullHttpRequest;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.HttpClientCodec;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpObject;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.LastHttpContent;
import java.util.Arrays;
import java.util.concurrent.CompletableFuture;
import java.util.function.BooleanSupplier;

/**
 * One closed-loop client: a context leg, then a generation leg under the same {@code x-request-id},
 * then the next flow, until told to stop. Its two keep-alive connections (one per Envoy listener) live
 * on one event loop, so its state needs no locks. The generation leg is timed as a user feels it: TTFT
 * from handing the request to the socket to the first read that brings body bytes, then the gap between
 * successive such reads; the body is checked whole (length and the usage event at its end).
 */
final class FlowLane {
  private enum Leg { CONTEXT, GENERATION }

  private final EventLoop loop;
  private final int[] ports;
  private final String idPrefix;
  private final FlowBodies bodies;
  private final FlowRecorder recorder;
  private final BooleanSupplier running;
  private final CompletableFuture<Void> done = new CompletableFuture<>();
  private final Channel[] channels = new Channel[2];
  /** The end of the body read so far (the usage event and [DONE] when complete). */
  private final byte[] tail;
  private long flows;
  private Leg leg;
  private int status;
  private long length;
  private long sentNanos;
  private long lastNanos;
  /** Whether the socket read being delivered has already been timed. */
  private boolean bodyInThisRead;

  FlowLane(EventLoop loop, int contextPort, int generationPort, String idPrefix, FlowBodies bodies,
      FlowRecorder recorder, BooleanSupplier running) {
    this.loop = loop;
    this.ports = new int[] {contextPort, generationPort};
    this.idPrefix = idPrefix;
    this.bodies = bodies;
    this.recorder = recorder;
    this.running = running;
    this.tail = new byte[Math.max(bodies.correctedTail.length, bodies.untouchedTail.length)];
  }

  /** Completes when the lane has stopped after its last flow and closed its connections. */
  CompletableFuture<Void> done() {
    return done;
  }

  /** Starts the first flow (on the lane's event loop). */
  void start() {
    loop.execute(this::nextFlow);
  }

  private void nextFlow() {
    if (!running.getAsBoolean()) {
      for (Channel c : channels) {
        if (c != null) {
          c.close();
        }
      }
      done.complete(null);
      return;
    }
    flows++;
    send(Leg.CONTEXT, FlowBodies.CONTEXT_REQUEST);
  }

  private void send(Leg next, byte[] body) {
    leg = next;
    status = 0;
    length = 0;
    lastNanos = 0;
    FullHttpRequest request =
        new DefaultFullHttpRequest(HttpVersion.HTTP_1_1, HttpMethod.POST, FlowBodies.PATH, Unpooled.wrappedBuffer(body));
    request.headers()
        .set(HttpHeaderNames.HOST, "localhost")
        .set(HttpHeaderNames.CONTENT_TYPE, "application/json")
        .set("x-request-id", idPrefix + flows);
    HttpUtil.setContentLength(request, body.length);
    Channel channel = channels[next.ordinal()];
    if (channel != null && channel.isActive()) {
      write(channel, request);
      return;
    }
    connect(next).addListener((ChannelFuture connected) -> {
      if (!connected.isSuccess()) {
        request.release();
        fail("cannot connect to the " + name(next) + " listener");
        return;
      }
      channels[next.ordinal()] = connected.channel();
      write(connected.channel(), request);
    });
  }

  private void write(Channel channel, FullHttpRequest request) {
    sentNanos = System.nanoTime();
    channel.writeAndFlush(request, channel.voidPromise());
  }

  private ChannelFuture connect(Leg target) {
    return new Bootstrap()
        .group(loop)
        .channel(NioSocketChannel.class)
        .option(ChannelOption.TCP_NODELAY, true)
        .handler(new ChannelInitializer<SocketChannel>() {
          @Override
          protected void initChannel(SocketChannel ch) {
            ch.pipeline().addLast(new HttpClientCodec(), new Reader(target));
          }
        })
        .connect("127.0.0.1", ports[target.ordinal()]);
  }

  private void onResponse(HttpResponse response) {
    status = response.status().code();
  }

  private void onBody(ByteBuf content) {
    int n = content.readableBytes();
    if (n == 0) {
      return;
    }
    if (leg == Leg.GENERATION) {
      // Timed per socket read, not per HTTP chunk: the chunks one read delivers arrive together.
      if (!bodyInThisRead) {
        bodyInThisRead = true;
        long now = System.nanoTime();
        if (recorder.inWindow(now)) {
          if (lastNanos == 0) {
            recorder.ttft.record(now - sentNanos);
          } else {
            recorder.gap.record(now - lastNanos);
          }
        }
        lastNanos = now;
      }
      keepTail(content);
    }
    length += n;
  }

  /** Shifts the last {@code tail.length} body bytes into {@link #tail}. */
  private void keepTail(ByteBuf content) {
    int n = content.readableBytes();
    int keep = Math.min(n, tail.length);
    System.arraycopy(tail, keep, tail, 0, tail.length - keep);
    content.getBytes(content.readerIndex() + n - keep, tail, tail.length - keep, keep);
  }

  private void onEnd(Leg finished) {
    if (status != 200) {
      fail(name(finished) + " leg answered " + status);
      return;
    }
    if (finished == Leg.CONTEXT) {
      if (length != FlowBodies.CONTEXT_RESPONSE.length) {
        recorder.problem("context response of another length than the worker's");
      }
      send(Leg.GENERATION, FlowBodies.GENERATION_REQUEST);
      return;
    }
    long now = System.nanoTime();
    check();
    recorder.completed(now);
    nextFlow();
  }

  /** Counts the generation body as corrected, untouched or neither, against what this setup must deliver. */
  private void check() {
    recorder.checked.incrementAndGet();
    boolean corrected = length == bodies.correctedLength && endsWith(bodies.correctedTail);
    boolean untouched = length == bodies.untouchedLength && endsWith(bodies.untouchedTail);
    if (recorder.expectCorrected() ? corrected : untouched) {
      recorder.asExpected.incrementAndGet();
    } else if (corrected || untouched) {
      recorder.problem(corrected ? "generation usage corrected where nothing may change it" : "generation usage not corrected");
    } else {
      recorder.problem("generation body neither the worker's nor the corrected one");
    }
  }

  private boolean endsWith(byte[] expected) {
    int from = tail.length - expected.length;
    return from >= 0 && Arrays.equals(tail, from, tail.length, expected, 0, expected.length);
  }

  /**
   * A broken flow: counted, its connections dropped, the next flow started on fresh ones a little later
   * (so an Envoy that refuses connections is not hammered in a tight loop).
   */
  private void fail(String what) {
    leg = null;
    recorder.problem(what);
    for (int i = 0; i < channels.length; i++) {
      if (channels[i] != null) {
        channels[i].close();
        channels[i] = null;
      }
    }
    loop.schedule(this::nextFlow, 50, java.util.concurrent.TimeUnit.MILLISECONDS);
  }

  private static String name(Leg leg) {
    return leg.name().toLowerCase(java.util.Locale.ROOT);
  }

  /** Feeds one connection's responses to the lane while it is that connection's turn. */
  private final class Reader extends SimpleChannelInboundHandler<HttpObject> {
    private final Leg target;

    Reader(Leg target) {
      this.target = target;
    }

    @Override
    protected void channelRead0(ChannelHandlerContext ctx, HttpObject msg) {
      if (leg != target) {
        recorder.problem("a response on a connection with no request outstanding");
        return;
      }
      if (msg instanceof HttpResponse response) {
        onResponse(response);
      }
      if (msg instanceof HttpContent content) {
        onBody(content.content());
        if (msg instanceof LastHttpContent) {
          leg = null;
          onEnd(target);
        }
      }
    }

    @Override
    public void channelReadComplete(ChannelHandlerContext ctx) {
      bodyInThisRead = false;
      ctx.fireChannelReadComplete();
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
      if (leg == target && channels[target.ordinal()] == ctx.channel()) {
        leg = null;
        fail("connection closed mid-" + name(target) + " leg");
      }
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
      ctx.close(); // channelInactive counts the broken leg
    }
  }
}
