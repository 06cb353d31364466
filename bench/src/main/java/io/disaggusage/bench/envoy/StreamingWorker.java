package io.disaggusage.bench.envoy;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpRequestDecoder;
import io.netty.handler.codec.http.HttpUtil;
import java.io.ByteArrayOutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * An HTTP/1.1 worker pool of one that costs next to nothing per flow, so it does not compete with Envoy
 * for the cores: every response's bytes (status line, headers, chunk framing) are encoded once at start,
 * and a flow writes shared read-only views of them. The context worker answers with the prefill JSON
 * ({@code content-length}, as uvicorn sends a JSON body); the generation worker streams the decode SSE
 * with {@code Transfer-Encoding: chunked}, one chunk per event, as an engine's streaming response does.
 * Without an inter-token delay it writes the whole stream at once (a worker faster than the network:
 * the kernel and Envoy decide the read sizes); with a delay it writes each content event on its own, the
 * next one scheduled on the event loop {@code delay} later, and the usage event, {@code [DONE]} and the
 * last chunk right after the last content event.
 */
final class StreamingWorker implements AutoCloseable {
  enum Role { CONTEXT, GENERATION }

  private final Channel server;
  /** The whole response, written at once: the context answer, or the stream without a delay. */
  private final ByteBuf whole;
  /** GENERATION: the head with the first event's chunk, then one chunk per further event. */
  private final List<ByteBuf> pieces = new ArrayList<>();
  /** GENERATION: the usage event's and [DONE]'s chunks and the last (empty) chunk. */
  private final ByteBuf end;
  private volatile long delayNanos;

  StreamingWorker(EventLoopGroup group, Role role, FlowBodies bodies) throws InterruptedException {
    if (role == Role.CONTEXT) {
      whole = shared(head("application/json", "content-length: " + FlowBodies.CONTEXT_RESPONSE.length),
          FlowBodies.CONTEXT_RESPONSE);
      end = null;
    } else {
      byte[] head = head("text/event-stream", "transfer-encoding: chunked");
      ByteArrayOutputStream all = new ByteArrayOutputStream();
      all.writeBytes(head);
      for (int i = 0; i < bodies.events.size(); i++) {
        byte[] chunk = chunk(bodies.events.get(i));
        pieces.add(i == 0 ? shared(head, chunk) : shared(chunk));
        all.writeBytes(chunk);
      }
      byte[] last = concat(chunk(bodies.usageEvent), chunk(FlowBodies.done()), ascii("0\r\n\r\n"));
      end = shared(last);
      all.writeBytes(last);
      whole = shared(all.toByteArray());
    }
    this.server = new ServerBootstrap()
        .group(group)
        .channel(NioServerSocketChannel.class)
        .option(ChannelOption.SO_BACKLOG, 1024)
        .childOption(ChannelOption.TCP_NODELAY, true)
        .childHandler(new ChannelInitializer<SocketChannel>() {
          @Override
          protected void initChannel(SocketChannel ch) {
            // requests are decoded; responses leave as the pre-encoded bytes, so no response encoder
            ch.pipeline().addLast(new HttpRequestDecoder(), new HttpObjectAggregator(1 << 20), new Answer());
          }
        })
        .bind(new InetSocketAddress("127.0.0.1", 0))
        .sync()
        .channel();
  }

  int port() {
    return ((InetSocketAddress) server.localAddress()).getPort();
  }

  /** The time between two content events from now on. */
  void delay(Duration delay) {
    this.delayNanos = delay.toNanos();
  }

  @Override
  public void close() {
    server.close().syncUninterruptibly();
  }

  private static byte[] head(String contentType, String framing) {
    return ascii("HTTP/1.1 200 OK\r\ncontent-type: " + contentType + "\r\n" + framing + "\r\n\r\n");
  }

  /** {@code data} as one chunk of a chunked body: its size in hex, CRLF, the data, CRLF. */
  private static byte[] chunk(byte[] data) {
    return concat(ascii(Integer.toHexString(data.length) + "\r\n"), data, ascii("\r\n"));
  }

  private static byte[] concat(byte[]... parts) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (byte[] p : parts) {
      out.writeBytes(p);
    }
    return out.toByteArray();
  }

  private static byte[] ascii(String s) {
    return s.getBytes(StandardCharsets.US_ASCII);
  }

  /** The bytes in a direct buffer every connection writes views of: never released, never copied. */
  private static ByteBuf shared(byte[]... parts) {
    byte[] bytes = concat(parts);
    return Unpooled.unreleasableBuffer(Unpooled.directBuffer(bytes.length).writeBytes(bytes).asReadOnly());
  }

  /** Answers each request of a keep-alive connection. */
  private final class Answer extends SimpleChannelInboundHandler<FullHttpRequest> {
    @Override
    protected void channelRead0(ChannelHandlerContext ctx, FullHttpRequest request) {
      boolean keepAlive = HttpUtil.isKeepAlive(request);
      long delay = delayNanos;
      if (pieces.isEmpty() || delay == 0) {
        finish(ctx.writeAndFlush(whole.duplicate()), keepAlive);
      } else {
        stream(ctx, 0, delay, keepAlive);
      }
    }

    /** Writes piece {@code i} and schedules the next, or ends the stream after the last. */
    private void stream(ChannelHandlerContext ctx, int i, long delay, boolean keepAlive) {
      if (!ctx.channel().isActive()) {
        return; // Envoy reset the stream: nobody reads the rest
      }
      if (i + 1 < pieces.size()) {
        ctx.writeAndFlush(pieces.get(i).duplicate());
        ctx.executor().schedule(() -> stream(ctx, i + 1, delay, keepAlive), delay, TimeUnit.NANOSECONDS);
      } else {
        ctx.write(pieces.get(i).duplicate());
        finish(ctx.writeAndFlush(end.duplicate()), keepAlive);
      }
    }

    private void finish(ChannelFuture written, boolean keepAlive) {
      if (!keepAlive) {
        written.addListener(ChannelFutureListener.CLOSE);
      }
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
      ctx.close(); // a connection Envoy reset; the client counts the flow it broke
    }
  }
}
