import { defineConfig } from "vite";
import { sessionEndpoint } from "./server/session";

export default defineConfig({
  plugins: [sessionEndpoint()],
  server: { host: "127.0.0.1", port: 5173, strictPort: true },
  preview: { host: "127.0.0.1", port: 4173, strictPort: true },
});
